package sched

import (
	"slices"
	"testing"

	"switchyard.dev/libs/kvhash"
)

// TestSeqBlockHashes checks the cached hashes against a fresh computation
// as tokens are appended, after preemption, after shortening and when the
// block size or salt changes.
func TestSeqBlockHashes(t *testing.T) {
	t.Parallel()
	check := func(q *Seq, blockSize int, when string) {
		t.Helper()
		got := q.BlockHashes(blockSize)
		want := kvhash.BlockHashes(q.Tokens, blockSize, q.Salt)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: hashes %#x, want %#x", when, got, want)
		}
	}
	q := seq(1, 10, 0)
	q.Salt = 3
	check(q, bs, "prompt")
	for i := range 9 {
		q.Tokens = append(q.Tokens, uint32(100+i))
		check(q, bs, "after an append")
	}
	q.Tokens = q.Tokens[:6]
	check(q, bs, "after shortening")
	q.Tokens = append(q.Tokens, 1, 2, 3)
	check(q, bs, "regrown")
	check(q, 2, "another block size")
	q.Salt = 4
	check(q, 2, "another salt")
	if q.BlockHashes(0) != nil {
		t.Fatal("a non-positive block size must yield nil")
	}

	// Through the scheduler: hashes survive preemption (the tokens do) and
	// the blocks committed after the recompute carry the same hashes.
	h := newHarness(t, 4, Config{MaxBatchTokens: 64, MaxRunning: 4})
	a, b := seq(1, 6, 0), seq(2, 6, 0)
	b.Salt = 9
	h.s.Add(a)
	h.s.Add(b)
	for b.Preemptions() == 0 || !b.Running() {
		h.step()
		check(a, bs, "a running")
		check(b, bs, "b after a step")
		if len(a.Tokens) > 20 {
			t.Fatal("b was never preempted and readmitted")
		}
	}
	h.step()
	if n, _ := h.kv.Probe(b.BlockHashes(bs)); n < b.Computed()/bs || b.Computed() < bs {
		t.Fatalf("%d of b's blocks cached, %d tokens computed", n, b.Computed())
	}
}

// TestBlockedAdmissionDoesNotRehash: a sequence waiting for KV space is
// probed on every Schedule; it must reuse its hashes, not hash (and
// allocate) again each time. Not parallel: it counts allocations.
func TestBlockedAdmissionDoesNotRehash(t *testing.T) {
	h := newHarness(t, 4, Config{MaxBatchTokens: 64, MaxRunning: 4})
	a := seq(1, 12, 0)
	h.s.Add(a)
	h.s.Schedule() // a takes 3 of the 4 blocks; its step never completes
	b := seq(2, 12, 0)
	b.Tokens[0] = 1 // no prefix shared with a
	h.s.Add(b)
	blocked := testing.AllocsPerRun(20, func() { h.s.Schedule() })
	if h.s.Waiting() != 1 {
		t.Fatalf("b must wait: waiting %d", h.s.Waiting())
	}
	h.s.Abort(b)
	alone := testing.AllocsPerRun(20, func() { h.s.Schedule() })
	if blocked != alone {
		t.Fatalf("Schedule allocated %v times with b waiting, %v without", blocked, alone)
	}
}
