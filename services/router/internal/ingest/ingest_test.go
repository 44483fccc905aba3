package ingest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/radix"
	"switchyard.dev/services/router/internal/workertest"
)

func newIngester(t *testing.T, ix *radix.Index) *Ingester {
	t.Helper()
	return New(Config{Index: ix, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
}

// inSync reports whether the index holds exactly what w caches.
func inSync(ix *radix.Index, id string, w *workertest.Worker) func() bool {
	return func() bool {
		want := w.State()
		got, ok := ix.Dump()[id]
		return ok && got.Next == want.Next && slices.Equal(got.Blocks, want.Blocks)
	}
}

func TestFollow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// before runs before the router subscribes, during after it synced.
		before, during func(w *workertest.Worker)
		wantDumps      int
	}{
		{"dump then live", func(w *workertest.Worker) { w.Store(1, 2) }, func(w *workertest.Worker) { w.Store(3); w.Remove(1) }, 1},
		{"empty worker", nil, func(w *workertest.Worker) { w.Store(7) }, 1},
		{"dump in chunks", func(w *workertest.Worker) {
			w.DumpInChunks(2)
			for h := range uint64(9) {
				w.Store(h + 1)
			}
			w.Remove(4)
		}, func(w *workertest.Worker) { w.Store(30); w.Remove(2) }, 1},
		{"gap resyncs", func(w *workertest.Worker) { w.Store(1) }, func(w *workertest.Worker) {
			w.StoreHidden(2)
			w.Store(3)
		}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w := workertest.Start(t)
			if tt.before != nil {
				tt.before(w)
			}
			ix := radix.New()
			in := newIngester(t, ix)
			in.Sync(t.Context(), []Worker{{ID: "w", URL: w.URL}})
			deptest.Eventually(t, 10*time.Second, "initial sync", inSync(ix, "w", w))
			tt.during(w)
			deptest.Eventually(t, 10*time.Second, "live sync", inSync(ix, "w", w))
			dumps := 0
			for _, r := range w.Requests() {
				if r.GetDump() {
					dumps++
				}
				if !r.GetOmitTokenIds() {
					t.Errorf("subscription %v asks for token ids; the index needs only hashes", r)
				}
			}
			for _, enc := range w.AcceptEncodings() {
				if strings.Contains(enc, "gzip") {
					t.Errorf("a subscription accepts %q; event streams are hashes, not worth gzip", enc)
				}
			}
			if dumps != tt.wantDumps {
				t.Errorf("%d dump subscriptions, want %d: %v", dumps, tt.wantDumps, w.Requests())
			}
		})
	}
}

// A router restored from a snapshot resumes after its sequence; when the
// worker no longer has that history (OutOfRange) it dumps instead.
func TestResume(t *testing.T) {
	t.Parallel()
	for _, forget := range []bool{false, true} {
		t.Run(map[bool]string{false: "history kept", true: "history gone"}[forget], func(t *testing.T) {
			t.Parallel()
			w := workertest.Start(t)
			w.Store(1)
			w.Store(2)
			ix := radix.New()
			if err := ix.AddWorker("w"); err != nil {
				t.Fatal(err)
			}
			if err := ix.Resync("w", 1, []radix.Block{{Hash: 1, Tiers: kvtier.Device.Mask()}}); err != nil {
				t.Fatal(err)
			}
			if forget {
				w.Forget(2)
			}
			in := newIngester(t, ix)
			in.Sync(t.Context(), []Worker{{ID: "w", URL: w.URL}})
			deptest.Eventually(t, 10*time.Second, "resumed", inSync(ix, "w", w))
			reqs := w.Requests()
			if reqs[0].GetDump() || reqs[0].GetAfterSequence() != 1 {
				t.Errorf("first subscription %v, want after_sequence 1 without dump", reqs[0])
			}
			if forget != (len(reqs) == 2 && reqs[1].GetDump()) {
				t.Errorf("subscriptions %v (history gone: %v)", reqs, forget)
			}
		})
	}
}

// A router restored from a snapshot taken before the worker restarted
// holds a position from the worker's earlier run. Each run starts at a
// random sequence number, so the position lies below the new run's start
// or above its latest batch: the worker refuses it and the router dumps,
// dropping the dead process's blocks (here block 1), rather than resuming
// inside a history it never saw.
func TestRestoredPositionFromEarlierRun(t *testing.T) {
	t.Parallel()
	const restored = 1 << 30 // the position the snapshot saved
	for _, tc := range []struct {
		name  string
		start uint64 // the new run's start
	}{
		{"new run starts above it", restored + 1<<20},
		{"new run still below it", restored - 1<<20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := workertest.Start(t)
			w.StartAfter(tc.start)
			for h := range uint64(5) {
				w.Store(h + 10)
			}
			ix := radix.New()
			if err := ix.AddWorker("w"); err != nil {
				t.Fatal(err)
			}
			if err := ix.Resync("w", restored, []radix.Block{{Hash: 1, Tiers: kvtier.Device.Mask()}}); err != nil {
				t.Fatal(err)
			}
			in := newIngester(t, ix)
			in.Sync(t.Context(), []Worker{{ID: "w", URL: w.URL}})
			deptest.Eventually(t, 10*time.Second, "in sync with the new run", inSync(ix, "w", w))
			reqs := w.Requests()
			if len(reqs) != 2 || reqs[0].GetAfterSequence() != restored || !reqs[1].GetDump() {
				t.Errorf("subscriptions %v; want a resume after %d, refused, then a dump", reqs, restored)
			}
		})
	}
}

// A stream that breaks inside a dump leaves the worker without a sequence,
// so the next subscription dumps again instead of resuming after the
// dump's sequence with the rest of the cache never sent.
func TestDumpBreaksMidway(t *testing.T) {
	t.Parallel()
	w := workertest.Start(t)
	w.DumpInChunks(2)
	for h := range uint64(6) {
		w.Store(h + 1)
	}
	w.BreakDumpAfter(1)
	ix := radix.New()
	in := newIngester(t, ix)
	in.Sync(t.Context(), []Worker{{ID: "w", URL: w.URL}})
	deptest.Eventually(t, 10*time.Second, "sync after the broken dump", inSync(ix, "w", w))
	var dumps int
	for _, r := range w.Requests() {
		if !r.GetDump() {
			t.Errorf("resumed without a dump: %v", r)
		}
		dumps++
	}
	if dumps != 2 {
		t.Errorf("%d subscriptions, want 2 dumps: %v", dumps, w.Requests())
	}
	w.Store(9)
	deptest.Eventually(t, 10*time.Second, "live sync", inSync(ix, "w", w))
}

// A worker before 0.4.0 does not mark its dump's last batch: the dump's
// blocks match at once, and the sequence is set by the first live batch.
func TestLegacyDump(t *testing.T) {
	t.Parallel()
	w := workertest.Start(t)
	w.LegacyDump()
	w.DumpInChunks(2)
	for h := range uint64(5) {
		w.Store(h + 1)
	}
	ix := radix.New()
	in := newIngester(t, ix)
	in.Sync(t.Context(), []Worker{{ID: "w", URL: w.URL}})
	want := w.State()
	deptest.Eventually(t, 10*time.Second, "the dump's blocks, no sequence yet", func() bool {
		got, ok := ix.Dump()["w"]
		return ok && got.Next == 0 && slices.Equal(got.Blocks, want.Blocks)
	})
	w.Store(9)
	w.Remove(2)
	deptest.Eventually(t, 10*time.Second, "live sync", inSync(ix, "w", w))
}

func TestWorkerLeaves(t *testing.T) {
	t.Parallel()
	a, b := workertest.Start(t), workertest.Start(t)
	a.Store(1)
	b.Store(2)
	ix := radix.New()
	if err := ix.AddWorker("stale"); err != nil { // e.g. from a snapshot, no longer in discovery
		t.Fatal(err)
	}
	in := newIngester(t, ix)
	ctx, cancel := context.WithCancel(t.Context())
	defer func() { cancel(); in.Wait() }()
	in.Sync(ctx, []Worker{{ID: "a", URL: a.URL}, {ID: "b", URL: b.URL}})
	deptest.Eventually(t, 10*time.Second, "a", inSync(ix, "a", a))
	deptest.Eventually(t, 10*time.Second, "b", inSync(ix, "b", b))
	if slices.Contains(ix.Workers(), "stale") {
		t.Error("worker not in discovery kept")
	}
	in.Sync(ctx, []Worker{{ID: "b", URL: b.URL}})
	if got := ix.Workers(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("workers after a left: %v", got)
	}
	if r := ix.Match([]uint64{1}); len(r.Workers) != 0 {
		t.Errorf("blocks of departed worker still match: %v", r.Workers)
	}
}

func TestReconnects(t *testing.T) {
	t.Parallel()
	w := workertest.Start(t)
	w.Store(1)
	ix := radix.New()
	in := newIngester(t, ix)
	// Point the follower at a dead address first, then at the worker.
	in.Sync(t.Context(), []Worker{{ID: "w", URL: "http://127.0.0.1:1"}})
	time.Sleep(30 * time.Millisecond)
	in.Sync(t.Context(), []Worker{{ID: "w", URL: w.URL}})
	deptest.Eventually(t, 10*time.Second, "synced after reconnect", inSync(ix, "w", w))
}

// A worker answering Unimplemented is approximated, asked again later, and
// followed (no longer approximated) once it serves events.
// A worker id that comes back at another address (a restarted worker) is
// dumped again, not resumed after the old process's sequence.
func TestWorkerMoves(t *testing.T) {
	t.Parallel()
	old, moved := workertest.Start(t), workertest.Start(t)
	for h := range uint64(5) {
		old.Store(h + 1)
	}
	for h := range uint64(10) { // a history longer than the old one's: resuming would skip its start
		moved.Store(h + 20)
	}
	ix := radix.New()
	in := newIngester(t, ix)
	in.Sync(t.Context(), []Worker{{ID: "w", URL: old.URL}})
	deptest.Eventually(t, 10*time.Second, "old synced", inSync(ix, "w", old))
	in.Sync(t.Context(), []Worker{{ID: "w", URL: moved.URL}})
	deptest.Eventually(t, 10*time.Second, "moved synced", inSync(ix, "w", moved))
	if reqs := moved.Requests(); len(reqs) == 0 || !reqs[0].GetDump() {
		t.Errorf("first subscription at the new address %v, want a dump", reqs)
	}
}

func TestNoEvents(t *testing.T) {
	t.Parallel()
	w := workertest.Start(t)
	w.NoEvents()
	w.Store(4)
	calls := make(chan string, 8)
	ix := radix.New()
	in := New(Config{Index: ix, NoEventsRetry: 10 * time.Millisecond,
		OnNoEvents: func(id string) { calls <- "none " + id },
		OnEvents:   func(id string) { calls <- "events " + id }})
	in.Sync(t.Context(), []Worker{{ID: "w", URL: w.URL}})
	next := func() string {
		select {
		case c := <-calls:
			return c
		case <-time.After(10 * time.Second): // a hang guard
			t.Fatal("no callback")
			return ""
		}
	}
	if c := next(); c != "none w" {
		t.Fatalf("first callback %q", c)
	}
	w.ServeEvents()
	if c := next(); c != "events w" {
		t.Fatalf("second callback %q", c)
	}
	deptest.Eventually(t, 10*time.Second, "followed", inSync(ix, "w", w))
	if len(calls) != 0 {
		t.Errorf("more callbacks: %q", <-calls)
	}
}
