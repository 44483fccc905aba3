package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/discovery/disctest"
	"switchyard.dev/libs/mesh/discovery/filedisc"
)

// ids renders what fn got as role -> instance ids, to compare in tests.
func ids(latest map[string][]discovery.Instance) map[string][]string {
	out := make(map[string][]string, len(latest))
	for role, ins := range latest {
		out[role] = []string{}
		for _, in := range ins {
			out[role] = append(out[role], in.ID)
		}
	}
	return out
}

// recorder keeps what WatchRoles delivered.
type recorder struct {
	mu    sync.Mutex
	calls []map[string][]string
}

func (r *recorder) fn(latest map[string][]discovery.Instance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, ids(latest))
}

func (r *recorder) last() map[string][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.calls) == 0 {
		return nil
	}
	return r.calls[len(r.calls)-1]
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

func sameIDs(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for role, x := range a {
		if y, ok := b[role]; !ok || !slices.Equal(x, y) {
			return false
		}
	}
	return true
}

// waitFor waits until r's last delivery is want, against the file
// registry's real polling.
func waitFor(t *testing.T, r *recorder, want map[string][]string) {
	t.Helper()
	deptest.Eventually(t, 5*time.Second, fmt.Sprintf("delivery of %v", want), func() bool { return sameIDs(r.last(), want) })
}

func TestWatchRolesFileRegistry(t *testing.T) {
	t.Parallel()
	reg, err := filedisc.New(filedisc.Config{Dir: t.TempDir(), Lease: time.Minute, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	dec, err := reg.Register(ctx, disctest.Instance("decode-1", discovery.RoleDecode))
	if err != nil {
		t.Fatal(err)
	}
	var r recorder
	roles := []string{discovery.RoleDecode, discovery.RolePrefill}
	if err := discovery.WatchRoles(ctx, reg, nil, roles, r.fn); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &r, map[string][]string{"decode": {"decode-1"}, "prefill": {}})

	if _, err := reg.Register(ctx, disctest.Instance("prefill-1", discovery.RolePrefill)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &r, map[string][]string{"decode": {"decode-1"}, "prefill": {"prefill-1"}})

	if err := dec.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &r, map[string][]string{"decode": {}, "prefill": {"prefill-1"}})
}

func TestWatchRoleFileRegistry(t *testing.T) {
	t.Parallel()
	reg, err := filedisc.New(filedisc.Config{Dir: t.TempDir(), Lease: time.Minute, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var r recorder
	err = discovery.WatchRole(ctx, reg, nil, discovery.RoleRouter, func(ins []discovery.Instance) {
		r.fn(map[string][]discovery.Instance{discovery.RoleRouter: ins})
	})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, &r, map[string][]string{"router": {}})
	if _, err := reg.Register(ctx, disctest.Instance("router-1", discovery.RoleRouter)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &r, map[string][]string{"router": {"router-1"}})
}

// fakeRegistry hands out watches the test drives by hand.
type fakeRegistry struct {
	mu      sync.Mutex
	fail    map[string]error // Watch of the role fails with this
	watches map[string][]*fakeWatch
	live    int // watches whose goroutine still runs
}

type fakeWatch struct {
	in  chan []discovery.Instance
	end chan struct{} // closed: the watch ends early, as a broken backend's would
}

func newFakeRegistry() *fakeRegistry {
	return &fakeRegistry{fail: map[string]error{}, watches: map[string][]*fakeWatch{}}
}

func (f *fakeRegistry) Register(context.Context, discovery.Instance) (discovery.Registration, error) {
	return nil, errors.New("fake: not supported")
}

func (f *fakeRegistry) Instances(context.Context, string) ([]discovery.Instance, error) {
	return nil, errors.New("fake: not supported")
}

func (f *fakeRegistry) Watch(ctx context.Context, role string) (<-chan []discovery.Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail[role]; err != nil {
		return nil, err
	}
	w := &fakeWatch{in: make(chan []discovery.Instance), end: make(chan struct{})}
	f.watches[role] = append(f.watches[role], w)
	f.live++
	out := make(chan []discovery.Instance, 1)
	go func() {
		defer func() {
			f.mu.Lock()
			f.live--
			f.mu.Unlock()
			close(out)
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.end:
				return
			case v := <-w.in:
				discovery.SendLatest(out, v)
			}
		}
	}()
	return out, nil
}

// current is the role's latest watch.
func (f *fakeRegistry) current(t *testing.T, role string) *fakeWatch {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	ws := f.watches[role]
	if len(ws) == 0 {
		t.Fatalf("no watch of %s", role)
	}
	return ws[len(ws)-1]
}

func (f *fakeRegistry) counts(role string) (watches, live int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.watches[role]), f.live
}

func inst(id, role string) discovery.Instance { return disctest.Instance(id, role) }

func TestWatchRolesDelivery(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRegistry()
		var r recorder
		ctx, cancel := context.WithCancel(t.Context())
		if err := discovery.WatchRoles(ctx, f, nil, []string{"decode", "prefill"}, r.fn); err != nil {
			t.Fatal(err)
		}
		steps := []struct {
			role string
			ins  []discovery.Instance
			want map[string][]string
		}{
			// A role is missing until it first reports.
			{"decode", []discovery.Instance{inst("d1", "decode")}, map[string][]string{"decode": {"d1"}}},
			{"prefill", nil, map[string][]string{"decode": {"d1"}, "prefill": {}}},
			{"prefill", []discovery.Instance{inst("p1", "prefill")}, map[string][]string{"decode": {"d1"}, "prefill": {"p1"}}},
			{"decode", nil, map[string][]string{"decode": {}, "prefill": {"p1"}}},
		}
		for i, s := range steps {
			f.current(t, s.role).in <- s.ins
			synctest.Wait()
			if got := r.last(); r.count() != i+1 || !sameIDs(got, s.want) {
				t.Fatalf("step %d: %d deliveries, last %v; want %d, last %v", i, r.count(), got, i+1, s.want)
			}
		}

		cancel()
		synctest.Wait()
		if _, live := f.counts("decode"); live != 0 {
			t.Fatalf("%d watches still running after ctx ended", live)
		}
		if n := r.count(); n != len(steps) {
			t.Fatalf("%d deliveries after ctx ended, want %d", n, len(steps))
		}
	})
}

// A slow fn misses intermediate states but always gets the latest.
func TestWatchRolesSlowReaderGetsLatest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRegistry()
		release := make(chan struct{})
		var r recorder
		slow := func(latest map[string][]discovery.Instance) {
			r.fn(latest)
			<-release
		}
		if err := discovery.WatchRole(t.Context(), f, nil, "decode", func(ins []discovery.Instance) {
			slow(map[string][]discovery.Instance{"decode": ins})
		}); err != nil {
			t.Fatal(err)
		}
		w := f.current(t, "decode")
		w.in <- []discovery.Instance{inst("d1", "decode")}
		synctest.Wait() // fn is blocked on d1
		w.in <- []discovery.Instance{inst("d2", "decode")}
		w.in <- []discovery.Instance{inst("d3", "decode")}
		synctest.Wait()
		release <- struct{}{}
		synctest.Wait()
		close(release)
		synctest.Wait()
		want := []map[string][]string{{"decode": {"d1"}}, {"decode": {"d3"}}}
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.calls) != len(want) || !sameIDs(r.calls[0], want[0]) || !sameIDs(r.calls[1], want[1]) {
			t.Fatalf("deliveries = %v, want %v", r.calls, want)
		}
	})
}

// A watch the backend ends early is set up again with backoff; the role's
// last instances stay in force meanwhile.
func TestWatchRolesRewatchesAfterEarlyEnd(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRegistry()
		var r recorder
		if err := discovery.WatchRoles(t.Context(), f, nil, []string{"decode"}, r.fn); err != nil {
			t.Fatal(err)
		}
		f.current(t, "decode").in <- []discovery.Instance{inst("d1", "decode")}
		synctest.Wait()

		f.mu.Lock()
		f.fail["decode"] = errors.New("backend down")
		f.mu.Unlock()
		close(f.current(t, "decode").end)
		synctest.Wait()
		time.Sleep(time.Second) // several failed re-watches
		if n, _ := f.counts("decode"); n != 1 {
			t.Fatalf("%d watches while the backend fails, want 1", n)
		}

		f.mu.Lock()
		delete(f.fail, "decode")
		f.mu.Unlock()
		time.Sleep(10 * time.Second) // past the capped backoff
		synctest.Wait()
		if n, _ := f.counts("decode"); n != 2 {
			t.Fatalf("%d watches after the backend recovered, want 2", n)
		}
		if got, want := r.last(), map[string][]string{"decode": {"d1"}}; r.count() != 1 || !sameIDs(got, want) {
			t.Fatalf("while re-watching: %d deliveries, last %v; want 1, %v", r.count(), got, want)
		}
		f.current(t, "decode").in <- []discovery.Instance{inst("d2", "decode")}
		synctest.Wait()
		if got, want := r.last(), map[string][]string{"decode": {"d2"}}; !sameIDs(got, want) {
			t.Fatalf("after re-watch: last %v, want %v", got, want)
		}
	})
}

// A failing Watch fails WatchRoles, and the watches it had already started
// stop.
func TestWatchRolesSetupError(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newFakeRegistry()
		boom := errors.New("boom")
		f.fail["prefill"] = boom
		err := discovery.WatchRoles(t.Context(), f, nil, []string{"decode", "prefill"}, func(map[string][]discovery.Instance) {
			t.Error("fn called after a failed setup")
		})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want %v", err, boom)
		}
		synctest.Wait()
		if n, live := f.counts("decode"); n != 1 || live != 0 {
			t.Fatalf("decode: %d watches, %d running; want 1 started and stopped", n, live)
		}
	})
}
