package radix

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"switchyard.dev/libs/kvtier"
)

// chain returns hashes [from, to) of sequence s. Sequences model chained
// hashes: distinct sequences never share a block, and sequence 0 starts at
// hash 0 so the zero-hash path is exercised.
func chain(s, from, to int) []uint64 {
	hs := make([]uint64, 0, to-from)
	for i := from; i < to; i++ {
		hs = append(hs, uint64(s)*1000+uint64(i))
	}
	return hs
}

// TestDifferential drives the index and the reference model with the same
// random operations and compares Match and Dump along the way. The small
// hash universe forces shared blocks, big holder sets, dead slots and
// rehashes in both directions.
func TestDifferential(t *testing.T) {
	t.Parallel()
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, 99))
			ix, m := New(), newModel()
			names := make([]string, 40)
			for i := range names {
				names[i] = fmt.Sprintf("w%02d", i)
				if err := ix.AddWorker(names[i]); err != nil {
					t.Fatal(err)
				}
				m.add(names[i])
			}
			randEvent := func() Event {
				s, a := rng.IntN(12), rng.IntN(20)
				hs := chain(s, a, a+1+rng.IntN(30))
				tier := kvtier.Tier(rng.IntN(kvtier.Count))
				switch r := rng.IntN(100); {
				case r < 60:
					return StoredEvent(tier, hs...)
				case r < 98:
					return RemovedEvent(tier, hs...)
				default:
					return ClearedEvent()
				}
			}
			for step := range 3000 {
				name := names[rng.IntN(len(names))]
				switch r := rng.IntN(200); r {
				case 0:
					if err := ix.RemoveWorker(name); err != nil {
						t.Fatal(err)
					}
					delete(m.workers, name)
					if err := ix.AddWorker(name); err != nil {
						t.Fatal(err)
					}
					m.add(name)
				case 1:
					var blocks []Block
					for _, h := range chain(rng.IntN(12), 0, rng.IntN(40)) {
						blocks = append(blocks, Block{Hash: h, Tiers: kvtier.Mask(1 + rng.IntN(int(kvtier.All)))})
					}
					seq := rng.Uint64N(1000)
					if err := ix.Resync(name, seq, blocks); err != nil {
						t.Fatal(err)
					}
					m.resync(name, seq, blocks)
				default:
					evs := []Event{randEvent(), randEvent()}
					if err := ix.ApplyBatch(name, m.workers[name].next, evs); err != nil {
						t.Fatal(err)
					}
					m.apply(name, evs...)
					m.workers[name].next++
				}
				if step%10 == 0 {
					s := rng.IntN(12)
					checkMatch(t, ix, m, chain(s, 0, 1+rng.IntN(60)))
				}
			}
			checkDump(t, ix.Dump(), m.dump())
			st := ix.Stats()
			if st.Workers != len(names) || st.BigSets == 0 {
				t.Fatalf("stats %+v: want %d workers and some big sets", st, len(names))
			}
		})
	}
}

// TestConcurrent runs writers of distinct workers (batches, removals,
// clears, resyncs) against lock-free readers. Run it with -race. Readers
// check invariants that must hold at every instant; at the end the index
// must equal the model, because each worker's final state depends only on
// its own events.
func TestConcurrent(t *testing.T) {
	t.Parallel()
	const (
		workers = 8
		batches = 400
		readers = 3
		pinned  = 6 // every worker always holds chain(100, 0, pinned) on device
	)
	ix := New()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, workers+readers)
	models := make([]*model, workers)
	pin := StoredEvent(kvtier.Device, chain(100, 0, pinned)...)
	for w := range workers {
		name := fmt.Sprintf("w%d", w)
		if err := ix.AddWorker(name); err != nil {
			t.Fatal(err)
		}
		if err := ix.ApplyBatch(name, 0, []Event{pin}); err != nil {
			t.Fatal(err)
		}
		models[w] = newModel()
		models[w].add(name)
		models[w].apply(name, pin)
		models[w].workers[name].next = 1
	}
	for r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res Result
			rng := rand.New(rand.NewPCG(uint64(r), 7))
			var q []uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				if rng.IntN(2) == 0 {
					q = chain(rng.IntN(workers), 0, 40)
				} else {
					q = chain(100, 0, pinned+30)
				}
				ix.MatchInto(&res, q)
				if err := checkResult(&res, q, pinned); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var wwg sync.WaitGroup
	for w := range workers {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			if err := writeWorker(ix, models[w], fmt.Sprintf("w%d", w), w, batches, pin); err != nil {
				errs <- err
			}
		}()
	}
	wwg.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := map[string]WorkerState{}
	for _, m := range models {
		for k, v := range m.dump() {
			want[k] = v
		}
	}
	checkDump(t, ix.Dump(), want)
}

// writeWorker applies one worker's random but deterministic history.
func writeWorker(ix *Index, m *model, name string, w, batches int, pin Event) error {
	rng := rand.New(rand.NewPCG(uint64(w), 1))
	pinned := len(pin.Hashes)
	seq := uint64(1)
	apply := func(evs ...Event) error {
		if err := ix.ApplyBatch(name, seq, evs); err != nil {
			return err
		}
		m.apply(name, evs...)
		seq++
		m.workers[name].next = seq
		return nil
	}
	for range batches {
		s := w
		if rng.IntN(3) == 0 {
			s = 100 // the shared chain, beyond the pinned part
		}
		a := pinned + rng.IntN(20)
		hs := chain(s, a, a+1+rng.IntN(10))
		if s == w {
			hs = chain(s, 0, 1+rng.IntN(40))
		}
		var err error
		switch r := rng.IntN(50); {
		case r == 0:
			// A gap must be refused, then healed by a resync with the pin.
			if err := ix.ApplyBatch(name, seq+3, nil); !errors.Is(err, ErrSeqGap) {
				return fmt.Errorf("gap not detected: %w", err)
			}
			blocks := []Block{}
			for _, h := range pin.Hashes {
				blocks = append(blocks, Block{Hash: h, Tiers: kvtier.Device.Mask()})
			}
			seq += 10
			err = ix.Resync(name, seq-1, blocks)
			m.resync(name, seq-1, blocks)
		case r < 30:
			err = apply(StoredEvent(kvtier.Tier(rng.IntN(kvtier.Count)), hs...))
		default:
			err = apply(RemovedEvent(kvtier.Tier(rng.IntN(kvtier.Count)), hs...))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkResult checks what must hold for any Match at any instant.
func checkResult(r *Result, q []uint64, pinned int) error {
	longest := 0
	for _, wm := range r.Workers {
		d := wm.Depth
		if d[kvtier.Count-1] < 1 || d[kvtier.Count-1] > len(q) {
			return fmt.Errorf("worker %s: depth %v out of range", wm.Worker, d)
		}
		for t := 1; t < kvtier.Count; t++ {
			if d[t] < d[t-1] {
				return fmt.Errorf("worker %s: depths %v decrease", wm.Worker, d)
			}
		}
		if q[0] == chain(100, 0, 1)[0] && d[kvtier.Device] < pinned {
			return fmt.Errorf("worker %s: pinned prefix lost: %v", wm.Worker, d)
		}
		longest = max(longest, d[kvtier.Count-1])
	}
	if q[0] == chain(100, 0, 1)[0] && len(r.Workers) != 8 {
		return fmt.Errorf("pinned prefix: %d workers matched, want 8", len(r.Workers))
	}
	if longest != r.Longest {
		return fmt.Errorf("Longest %d, want %d", r.Longest, longest)
	}
	return nil
}

// TestMatchDoesNotAllocate pins the hot-path promise: a reused Result
// makes MatchInto allocation-free, including through big holder sets.
// (Not parallel: AllocsPerRun forbids it.)
func TestMatchDoesNotAllocate(t *testing.T) {
	ix := New()
	for i := range 40 {
		name := fmt.Sprint("w", i)
		if err := ix.AddWorker(name); err != nil {
			t.Fatal(err)
		}
		if err := ix.Apply(name, StoredEvent(kvtier.Tier(i%kvtier.Count), chain(1, 0, 10+i)...)); err != nil {
			t.Fatal(err)
		}
	}
	var r Result
	q := chain(1, 0, 60)
	ix.MatchInto(&r, q) // grow the buffers
	if allocs := testing.AllocsPerRun(100, func() { ix.MatchInto(&r, q) }); allocs != 0 {
		t.Fatalf("MatchInto allocates %.1f times per call", allocs)
	}
	if r.Longest != 49 || len(r.Workers) != 40 {
		t.Fatalf("Longest %d, %d workers", r.Longest, len(r.Workers))
	}
}

// TestTombstoneReuse churns two workers' disjoint blocks so that dead slots
// are constantly reused for the other worker's keys, while readers check
// that a lookup never reports a worker for a block it never held, and that
// blocks held throughout are always found.
func TestTombstoneReuse(t *testing.T) {
	ix := New()
	for _, name := range []string{"a", "b", "stable"} {
		if err := ix.AddWorker(name); err != nil {
			t.Fatal(err)
		}
	}
	// Few shards' worth of keys so the same slots are reused over and over.
	key := func(w, i uint64) uint64 { return w<<40 | i | 1 }
	var stable []uint64
	for i := range uint64(512) {
		stable = append(stable, key(3, i))
	}
	if err := ix.Apply("stable", StoredEvent(kvtier.Device, stable...)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w, name := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := uint64(0); ; round++ {
				select {
				case <-stop:
					return
				default:
				}
				hs := make([]uint64, 64)
				for j := range hs {
					hs[j] = key(uint64(w+1), (round*64+uint64(j))%4096)
				}
				_ = ix.Apply(name, StoredEvent(kvtier.Device, hs...))
				_ = ix.Apply(name, RemovedEvent(kvtier.Device, hs...))
			}
		}()
	}
	deadline := time.Now().Add(time.Second)
	var r Result
	for n := 0; time.Now().Before(deadline); n++ {
		for w, own := range []string{"a", "b"} {
			ix.MatchInto(&r, []uint64{key(uint64(w+1), uint64(n)%4096)})
			for _, wm := range r.Workers {
				if wm.Worker != own {
					close(stop)
					wg.Wait()
					t.Fatalf("block of %s reported held by %s", own, wm.Worker)
				}
			}
		}
		ix.MatchInto(&r, stable[n%len(stable):][:1])
		if len(r.Workers) != 1 || r.Workers[0].Worker != "stable" {
			close(stop)
			wg.Wait()
			t.Fatalf("stable block: %+v", r.Workers)
		}
	}
	close(stop)
	wg.Wait()
}
