package llamacpp

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvhash"
)

// index is a router's view of one worker, built only from its events.
type index map[uint64]bool

func (ix index) apply(t *testing.T, evs []kvevent.Event) {
	t.Helper()
	for _, e := range evs {
		switch e.Kind {
		case kvevent.Stored:
			if e.ParentHash != kvhash.Root && !ix[e.ParentHash] {
				t.Fatalf("stored %x after unknown parent %x", e.BlockHashes, e.ParentHash)
			}
			if want := kvhash.AppendBlockHashes(nil, e.ParentHash, e.TokenIDs, e.BlockSize, 0); !slices.Equal(want, e.BlockHashes) {
				t.Fatalf("stored hashes %x are not the chain of their tokens %x", e.BlockHashes, want)
			}
			for _, h := range e.BlockHashes {
				if ix[h] {
					t.Fatalf("block %x announced twice", h)
				}
				ix[h] = true
			}
		case kvevent.Removed:
			for _, h := range e.BlockHashes {
				if !ix[h] {
					t.Fatalf("removed %x, never stored", h)
				}
				delete(ix, h)
			}
		case kvevent.Cleared:
			clear(ix)
		}
	}
}

// held is every block hash the slots' mirrors hold.
func held(p *slots) index {
	ix := index{}
	for i := range p.s {
		for _, h := range kvhash.BlockHashes(p.s[i].tokens, p.bs, 0) {
			ix[h] = true
		}
	}
	return ix
}

// follow reads every batch since after.
func follow(t *testing.T, j *kvevent.Journal, after uint64, ix index) uint64 {
	t.Helper()
	bs, err := j.Since(after)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		ix.apply(t, b.Events)
		after = b.Seq
	}
	return after
}

func toks(n int, from uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = from + uint32(i)
	}
	return out
}

func TestSlotsPickLongestPrefixThenLeastRecent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := newSlots(3, 4, kvevent.NewJournal(64))
	a, b := toks(12, 100), toks(12, 200)
	for i, prompt := range [][]uint32{a, b} {
		id, keep, ep, err := p.acquire(ctx, prompt, 0)
		if err != nil || id != i || keep != 0 {
			t.Fatalf("acquire %d: slot %d keep %d err %v; want the unused slot %d", i, id, keep, err, i)
		}
		p.release(id, ep, prompt)
	}
	tests := []struct {
		name     string
		prompt   []uint32
		slot     int
		keepsLen int
	}{
		{"shares a's prefix", append(slices.Clone(a[:9]), 7, 7, 7), 0, 9},
		{"shares b entirely", slices.Clone(b), 1, 12},
		{"shares nothing: the unused slot", toks(8, 300), 2, 0},
		{"shares nothing: least recently used", toks(8, 400), 0, 0},
	}
	for _, tc := range tests {
		id, keep, ep, err := p.acquire(ctx, tc.prompt, 0)
		if err != nil || id != tc.slot || keep != tc.keepsLen {
			t.Fatalf("%s: slot %d keep %d err %v; want slot %d keep %d", tc.name, id, keep, err, tc.slot, tc.keepsLen)
		}
		p.release(id, ep, tc.prompt)
	}
}

// Whatever the sequence of hand-outs, prefills, releases and clears, a
// router that follows the journal holds exactly the blocks the mirrors
// hold, and a dump taken at any point rebuilds the same set.
func TestSlotsEventsMirrorTheSlots(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	j := kvevent.NewJournalAfter(1<<16, 77)
	p := newSlots(3, 4, j)
	ix, after := index{}, j.Last()
	prefixes := [][]uint32{toks(10, 100), toks(6, 200), toks(3, 300)}
	type run struct {
		id     int
		epoch  uint64
		prompt []uint32
	}
	var running []run
	for step := range 3000 {
		switch op := rng.IntN(10); {
		case op < 4 && len(running) < len(p.s):
			prompt := slices.Clone(prefixes[rng.IntN(len(prefixes))])
			prompt = append(prompt[:rng.IntN(len(prompt)+1)], toks(rng.IntN(12), uint32(rng.IntN(3)*50))...)
			if len(prompt) == 0 {
				prompt = []uint32{1}
			}
			id, keep, ep, err := p.acquire(t.Context(), prompt, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := commonPrefix(p.s[id].tokens, prompt); len(p.s[id].tokens) != keep || got != keep {
				t.Fatalf("step %d: slot %d mirror %v after handing out %v with keep %d", step, id, p.s[id].tokens, prompt, keep)
			}
			if rng.IntN(3) > 0 {
				p.cached(id, ep, prompt)
			}
			running = append(running, run{id, ep, prompt})
		case op < 8 && len(running) > 0:
			i := rng.IntN(len(running))
			r := running[i]
			running = slices.Delete(running, i, i+1)
			p.release(r.id, r.epoch, append(slices.Clone(r.prompt), toks(rng.IntN(9), 900)...))
		case op == 8:
			p.clear()
		default:
			d := p.dump()
			fresh := index{}
			fresh.apply(t, d.Events)
			after = follow(t, j, after, ix)
			if d.Seq != after || !maps(fresh, ix) {
				t.Fatalf("step %d: dump at %d holds %d blocks, the followed journal at %d %d", step, d.Seq, len(fresh), after, len(ix))
			}
		}
		after = follow(t, j, after, ix)
		if want := held(p); !maps(ix, want) {
			t.Fatalf("step %d: the journal says %d blocks, the mirrors hold %d", step, len(ix), len(want))
		}
	}
}

func maps(a, b index) bool {
	if len(a) != len(b) {
		return false
	}
	for h := range a {
		if !b[h] {
			return false
		}
	}
	return true
}

// A request that began before a clear (the engine restarted) claims
// nothing when it ends.
func TestSlotsClearOutdatesRequests(t *testing.T) {
	t.Parallel()
	j := kvevent.NewJournal(64)
	p := newSlots(1, 4, j)
	prompt := toks(8, 10)
	id, _, ep, err := p.acquire(t.Context(), prompt, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.cached(id, ep, prompt)
	p.clear()
	p.release(id, ep, prompt)
	if n := len(held(p)); n != 0 {
		t.Fatalf("%d blocks claimed after a clear", n)
	}
	if d := p.dump(); len(d.Events) != 0 {
		t.Fatalf("dump %v after a clear", d.Events)
	}
}

// With every slot busy, requests wait in the worker: higher priority
// first, then in arrival order; one that gives up leaves the queue.
func TestSlotsQueueByPriority(t *testing.T) {
	t.Parallel()
	p := newSlots(1, 4, nil)
	id, _, ep, err := p.acquire(t.Context(), toks(4, 0), 0)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 3)
	waitQueued := func(n int) {
		for {
			if _, w, _, _ := p.load(); w == n {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	for i, prio := range []int{0, 5} {
		go func() {
			id, _, ep, err := p.acquire(context.Background(), toks(4, uint32(10*i)), prio)
			if err != nil {
				t.Error(err)
				return
			}
			order <- prio
			p.release(id, ep, nil)
		}()
		waitQueued(i + 1)
	}
	gone, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, _, _, err := p.acquire(gone, toks(4, 50), 9)
		errc <- err
	}()
	waitQueued(3)
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled wait got a slot")
	}
	p.release(id, ep, nil)
	if a, b := <-order, <-order; a != 5 || b != 0 {
		t.Fatalf("served priorities %d then %d; want 5 then 0", a, b)
	}
	if busy, waiting, _, _ := p.load(); busy != 0 || waiting != 0 {
		t.Fatalf("busy %d waiting %d at the end", busy, waiting)
	}
}

// A prompt sharing less than a block with every slot goes to the unused
// one, not to a slot whose blocks it would discard for a token of reuse.
func TestSlotsKeepBlocksForSubBlockReuse(t *testing.T) {
	t.Parallel()
	p := newSlots(2, 4, kvevent.NewJournal(64))
	held := append([]uint32{1}, toks(12, 100)...)
	id, _, ep, err := p.acquire(t.Context(), held, 0)
	if err != nil {
		t.Fatal(err)
	}
	p.release(id, ep, held)
	other := append([]uint32{1}, toks(12, 500)...)
	if got, _, _, _ := p.acquire(t.Context(), other, 0); got == id {
		t.Fatalf("a prompt sharing one token took slot %d, which caches 3 blocks, over the unused slot", got)
	}
}
