package sched

import (
	"math/rand/v2"
	"slices"
	"testing"

	"switchyard.dev/libs/engine/kvcache"
)

const bs = 4

type harness struct {
	t  *testing.T
	kv *kvcache.Manager
	s  *Scheduler
}

func newHarness(t *testing.T, blocks int, cfg Config) *harness {
	t.Helper()
	kv, err := kvcache.New(kvcache.Config{NumBlocks: blocks, BlockSize: bs})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg, kv)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, kv: kv, s: s}
}

func seq(id uint64, n int, prio int) *Seq {
	tokens := make([]uint32, n)
	for i := range tokens {
		tokens[i] = uint32(i + 10)
	}
	return &Seq{ID: id, Tokens: tokens, PromptLen: n, Priority: prio}
}

// step schedules and completes, sampling token 7 for every Sample item.
func (h *harness) step() *Plan {
	p := h.s.Schedule()
	out := make([]uint32, len(p.Items))
	for i := range out {
		out[i] = 7
	}
	h.s.Complete(p, out)
	return p
}

func TestChunkedPrefillThenDecode(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 16, Config{MaxBatchTokens: 5, MaxRunning: 4})
	q := seq(1, 12, 0)
	h.s.Add(q)
	var spans [][2]int
	for range 5 {
		p := h.step()
		if len(p.Items) != 1 {
			t.Fatalf("items %+v", p.Items)
		}
		spans = append(spans, [2]int{p.Items[0].Start, p.Items[0].End})
	}
	want := [][2]int{{0, 5}, {5, 10}, {10, 12}, {12, 13}, {13, 14}}
	for i := range want {
		if spans[i] != want[i] {
			t.Fatalf("spans %v, want %v", spans, want)
		}
	}
	if len(q.Tokens) != 15 || q.Computed() != 14 || h.kv.Cached() != 3 {
		t.Fatalf("tokens %d computed %d cached %d", len(q.Tokens), q.Computed(), h.kv.Cached())
	}
}

func TestPrefixHitOnAdmission(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 16, Config{MaxBatchTokens: 64, MaxRunning: 4})
	a := seq(1, 10, 0)
	h.s.Add(a)
	h.step()
	h.s.Finish(a)
	b := seq(2, 10, 0)
	h.s.Add(b)
	p := h.step()
	// 10 tokens: blocks [0,4) and [4,8) cached; position 8.. computed.
	if p.Items[0].Start != 8 || b.CachedPromptTokens() != 8 {
		t.Fatalf("item %+v cached %d", p.Items[0], b.CachedPromptTokens())
	}
	if st := h.s.Stats(); st.PrefixHitTokens != 8 || st.PromptTokens != 20 {
		t.Fatalf("stats %+v", st)
	}
	// A fully cached prompt still recomputes the block of its last token.
	c := seq(3, 8, 0)
	h.s.Add(c)
	p = h.step()
	if it := p.Items[len(p.Items)-1]; it.Seq != c || it.Start != 4 || it.End != 8 {
		t.Fatalf("item %+v", it)
	}
}

func TestPriorityAndCap(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 64, Config{MaxBatchTokens: 100, MaxRunning: 2})
	lo, mid, hi := seq(1, 4, 0), seq(2, 4, 1), seq(3, 4, 5)
	h.s.Add(lo)
	h.s.Add(mid)
	h.s.Add(hi)
	p := h.step()
	if len(p.Items) != 2 || p.Items[0].Seq != hi || p.Items[1].Seq != mid {
		t.Fatalf("admitted %v", ids(p))
	}
	if h.s.Waiting() != 1 || h.s.Running() != 2 {
		t.Fatalf("waiting %d running %d", h.s.Waiting(), h.s.Running())
	}
}

func TestPreemptionByRecompute(t *testing.T) {
	t.Parallel()
	// 4 blocks of 4 tokens: two sequences of 6 tokens need 2 blocks each,
	// growing past 8 tokens needs a third: someone must be preempted.
	h := newHarness(t, 4, Config{MaxBatchTokens: 64, MaxRunning: 4})
	a, b := seq(1, 6, 0), seq(2, 6, 0)
	h.s.Add(a)
	h.s.Add(b)
	preempted := 0
	for range 40 {
		p := h.step()
		preempted += len(p.Preempted)
		for _, q := range []*Seq{a, b} {
			if len(q.Tokens) >= 14 && q.Running() {
				h.s.Finish(q)
			}
		}
		if h.s.Running() == 0 && h.s.Waiting() == 0 {
			break
		}
	}
	if preempted == 0 || len(a.Tokens) < 14 || len(b.Tokens) < 14 {
		t.Fatalf("preempted %d, lengths %d %d", preempted, len(a.Tokens), len(b.Tokens))
	}
	if b.Preemptions() == 0 || h.s.Stats().Preemptions != preempted {
		t.Fatalf("victim should be the later arrival: a %d b %d", a.Preemptions(), b.Preemptions())
	}
	if h.kv.Used() != 0 {
		t.Fatalf("%d blocks leaked", h.kv.Used())
	}
}

func TestTooLargeFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 2, Config{MaxBatchTokens: 64, MaxRunning: 4})
	q := seq(1, 20, 0)
	h.s.Add(q)
	p := h.step()
	if len(p.Failed) != 1 || p.Failed[0] != q || h.s.Waiting() != 0 {
		t.Fatalf("plan %+v", p)
	}
}

func TestAbortFreesBlocks(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 8, Config{MaxBatchTokens: 64, MaxRunning: 4})
	q := seq(1, 9, 0)
	h.s.Add(q)
	p := h.s.Schedule()
	if h.kv.Used() != 3 {
		t.Fatalf("used %d", h.kv.Used())
	}
	h.s.Abort(q)
	h.s.Complete(p, []uint32{1}) // the in-flight step finishing must be ignored
	if h.kv.Used() != 0 || len(q.Tokens) != 9 || h.s.Running() != 0 {
		t.Fatalf("used %d tokens %d", h.kv.Used(), len(q.Tokens))
	}
	w := seq(2, 4, 0)
	h.s.Add(w)
	h.s.Abort(w)
	if h.s.Waiting() != 0 {
		t.Fatal("abort must remove waiting sequences")
	}
}

func TestWatermark(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 8, Config{MaxBatchTokens: 64, MaxRunning: 8, WatermarkBlocks: 3})
	a, b := seq(1, 16, 0), seq(2, 8, 0)
	h.s.Add(a)
	h.s.Add(b)
	p := h.s.Schedule()
	// a takes 4 blocks (alone, so admitted despite the watermark rule);
	// b would leave 2 < 3 free.
	if len(p.Items) != 1 || h.s.Waiting() != 1 {
		t.Fatalf("admitted %v", ids(p))
	}
	if _, err := New(Config{}, h.kv); err == nil {
		t.Fatal("zero config must be rejected")
	}
}

func ids(p *Plan) []uint64 {
	var out []uint64
	for _, it := range p.Items {
		out = append(out, it.Seq.ID)
	}
	return out
}

// BenchmarkSchedule64 plans steps of 64 running sequences, under each
// order.
func BenchmarkSchedule64(b *testing.B) {
	for _, order := range []string{OrderFCFS, OrderShortest} {
		b.Run(order, func(b *testing.B) {
			kv, _ := kvcache.New(kvcache.Config{NumBlocks: 4096, BlockSize: 16})
			s, _ := New(Config{MaxBatchTokens: 4096, MaxRunning: 64, Order: order}, kv)
			seqs := make([]*Seq, 64)
			for i := range seqs {
				seqs[i] = seq(uint64(i), 100, 0)
				s.Add(seqs[i])
			}
			out := make([]uint32, 64)
			for b.Loop() {
				p := s.Schedule()
				s.Complete(p, out)
				for _, q := range seqs {
					if len(q.Tokens) > 1000 {
						s.Finish(q)
						q.Tokens = q.Tokens[:100]
						s.Add(q)
					}
				}
			}
		})
	}
}

// TestLongPrefillTokens: while a short prompt waits, a long prompt's chunk
// is capped and the short one is prefilled beside it; once the short one
// is prefilled, the long one takes the whole budget again; without the
// option it never yields.
func TestLongPrefillTokens(t *testing.T) {
	t.Parallel()
	spans := func(p *Plan) map[uint64]int {
		m := map[uint64]int{}
		for _, it := range p.Items {
			m[it.Seq.ID] = it.End - it.Start
		}
		return m
	}
	h := newHarness(t, 64, Config{MaxBatchTokens: 16, MaxRunning: 4, LongPrefillTokens: 4})
	long, short := seq(1, 100, 0), seq(2, 6, 0)
	for i := range short.Tokens {
		short.Tokens[i] += 1000 // no prefix shared with long
	}
	h.s.Add(long)
	if got := spans(h.step()); got[1] != 16 {
		t.Fatalf("alone: long got %v, want the whole budget", got)
	}
	h.s.Add(short)
	if got := spans(h.step()); got[1] != 4 || got[2] != 4 {
		t.Fatalf("contended: chunks %v, want 4 each", got)
	}
	if got := spans(h.step()); got[1] != 4 || got[2] != 2 {
		t.Fatalf("contended: chunks %v, want 4 and the short prompt's last 2", got)
	}
	if got := spans(h.step()); got[1] != 16 {
		t.Fatalf("short prefilled: chunks %v, want the long prompt's whole budget again", got)
	}

	off := newHarness(t, 64, Config{MaxBatchTokens: 16, MaxRunning: 4})
	off.s.Add(seq(1, 100, 0))
	off.step()
	off.s.Add(seq(2, 6, 0))
	if got := spans(off.step()); got[1] != 16 || got[2] != 0 {
		t.Fatalf("disabled: chunks %v, want the long prompt's 16 only", got)
	}
}

// chunks maps each planned sequence to its chunk, and lists the order.
func chunks(p *Plan) (map[uint64]int, []uint64) {
	m := map[uint64]int{}
	for _, it := range p.Items {
		m[it.Seq.ID] = it.End - it.Start
	}
	return m, ids(p)
}

// distinct gives q tokens that share no prefix with seq's.
func distinct(q *Seq, base uint32) *Seq {
	for i := range q.Tokens {
		q.Tokens[i] += base
	}
	return q
}

// TestShortestOrder: decodes go first, then prompts by what is left to
// compute, so a short prompt passes a long one that is mid-prefill; FCFS
// keeps the long one's whole chunk.
func TestShortestOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		order string
		want  map[uint64]int
		first uint64
	}{
		{OrderShortest, map[uint64]int{1: 9, 2: 1, 3: 6}, 2},
		{OrderFCFS, map[uint64]int{1: 16, 2: 0, 3: 0}, 1}, // dec still waits
	} {
		t.Run(tc.order, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, 128, Config{MaxBatchTokens: 16, MaxRunning: 4, Order: tc.order})
			long, dec := seq(1, 200, 0), distinct(seq(2, 3, 0), 1000)
			h.s.Add(long)
			h.s.Add(dec)
			h.step() // long 16 under FCFS; dec 3 (then decoding) and long 13 under shortest
			h.s.Add(distinct(seq(3, 6, 0), 2000))
			got, order := chunks(h.step())
			for id, n := range tc.want {
				if got[id] != n {
					t.Fatalf("chunks %v, want %v", got, tc.want)
				}
			}
			if order[0] != tc.first {
				t.Fatalf("order %v, want %d first", order, tc.first)
			}
		})
	}
}

// TestShortestCountsPrefixHits: what a waiting prompt has cached does not
// count, so a long prompt with a long cached prefix passes a shorter one
// that must be computed whole.
func TestShortestCountsPrefixHits(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 128, Config{MaxBatchTokens: 64, MaxRunning: 4, Order: OrderShortest})
	warm := seq(1, 60, 0)
	h.s.Add(warm)
	h.step()
	h.s.Finish(warm) // its 15 blocks stay cached
	cold, hit := distinct(seq(2, 30, 0), 1000), seq(3, 64, 0)
	h.s.Add(cold)
	h.s.Add(hit)
	p := h.s.Schedule()
	if _, order := chunks(p); len(order) != 2 || order[0] != 3 {
		t.Fatalf("order %v, want the prefix hit (3) first", order)
	}
	if p.Items[0].Start != 60 {
		t.Fatalf("hit starts at %d, want 60", p.Items[0].Start)
	}
}

// TestShortestAging: a long prompt is passed by a new short one early in
// its prefill, but not once it has waited as many steps as a step's budget
// covers its remaining tokens.
func TestShortestAging(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		stepsBefore int
		first       uint64
	}{
		{"passed early", 1, 2},
		{"not passed late", 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, 128, Config{MaxBatchTokens: 16, MaxRunning: 4, Order: OrderShortest})
			h.s.Add(seq(1, 100, 0))
			for range tc.stepsBefore {
				h.step()
			}
			// After 1 step: long has 84 left, aged 84-2*16 = 52 > short's 20-16.
			// After 3 steps: 52 left, aged 52-4*16 < 4.
			h.s.Add(distinct(seq(2, 20, 0), 1000))
			if _, order := chunks(h.step()); order[0] != tc.first {
				t.Fatalf("order %v, want %d first", order, tc.first)
			}
		})
	}
}

// TestOrdersCompleteUnderPressure drives random arrivals through a pool
// too small for them under both orders: every sequence finishes with all
// its tokens, each step's plan fits the budget, no planned sequence loses
// its blocks in the same step, and no block leaks.
func TestOrdersCompleteUnderPressure(t *testing.T) {
	t.Parallel()
	for _, order := range []string{OrderFCFS, OrderShortest} {
		t.Run(order, func(t *testing.T) {
			t.Parallel()
			const budget, gen = 12, 6
			h := newHarness(t, 12, Config{MaxBatchTokens: budget, MaxRunning: 6, Order: order})
			rng := rand.New(rand.NewPCG(1, 2))
			var all []*Seq
			live := map[*Seq]bool{}
			for step := 0; step < 2000 && (len(all) < 40 || len(live) > 0); step++ {
				if len(all) < 40 && rng.IntN(3) == 0 {
					q := distinct(seq(uint64(len(all)), 2+rng.IntN(20), rng.IntN(2)), uint32(len(all)%3)*1000)
					all = append(all, q)
					live[q] = true
					h.s.Add(q)
				}
				p := h.s.Schedule()
				total := 0
				for _, it := range p.Items {
					total += it.End - it.Start
					if !it.Seq.Running() {
						t.Fatalf("step %d: planned seq %d was preempted in the same step", step, it.Seq.ID)
					}
					if need := ceilDiv(it.End, bs); len(it.Seq.Blocks()) < need {
						t.Fatalf("step %d: seq %d has %d blocks for %d tokens", step, it.Seq.ID, len(it.Seq.Blocks()), it.End)
					}
				}
				if total > budget {
					t.Fatalf("step %d: %d tokens over the budget %d", step, total, budget)
				}
				for _, q := range p.Failed {
					t.Fatalf("seq %d failed", q.ID)
				}
				out := make([]uint32, len(p.Items))
				h.s.Complete(p, out)
				for q := range live {
					if len(q.Tokens) >= q.PromptLen+gen {
						h.s.Finish(q)
						delete(live, q)
					}
				}
			}
			if len(live) > 0 || len(all) < 40 {
				t.Fatalf("%d of %d sequences unfinished", len(live), len(all))
			}
			if h.kv.Used() != 0 || h.s.Running() != 0 || h.s.Waiting() != 0 {
				t.Fatalf("used %d running %d waiting %d", h.kv.Used(), h.s.Running(), h.s.Waiting())
			}
		})
	}
}

// BenchmarkScheduleQueue plans steps with 1,000 prompts waiting (4,096
// tokens each, half of them a cached prefix) behind 64 running sequences,
// under each order: the cost of ordering a long queue.
func BenchmarkScheduleQueue(b *testing.B) {
	for _, order := range []string{OrderFCFS, OrderShortest} {
		b.Run(order, func(b *testing.B) {
			kv, _ := kvcache.New(kvcache.Config{NumBlocks: 1 << 15, BlockSize: 16})
			s, _ := New(Config{MaxBatchTokens: 512, MaxRunning: 64, Order: order}, kv)
			warm := seq(0, 2048, 0)
			s.Add(warm)
			for warm.Computed() < 2048 {
				s.Complete(s.Schedule(), nil)
			}
			s.Finish(warm)
			for i := range 1000 {
				q := seq(uint64(i+1), 4096, 0)
				for j := 2048; j < 4096; j++ {
					q.Tokens[j] = uint32(i*4096 + j) // distinct after the shared prefix
				}
				s.Add(q)
			}
			out := make([]uint32, 512)
			for b.Loop() {
				s.Complete(s.Schedule(), out)
			}
		})
	}
}

// TestReadyHoldsInPlace: a sequence whose Ready is open is not admitted
// and, under FCFS, neither is anything behind it, while running sequences
// go on; under OrderShortest the others are admitted past it. Once Ready
// closes it is admitted ahead of anything that arrived after it.
func TestReadyHoldsInPlace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		order string
		step1 []uint64 // planned while 2 is held
		chunk int      // 2's first chunk, after the decodes
	}{
		{OrderFCFS, []uint64{1}, 7},
		{OrderShortest, []uint64{1, 3}, 6},
	} {
		t.Run(tc.order, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, 64, Config{MaxBatchTokens: 8, MaxRunning: 8, Order: tc.order})
			h.s.Add(distinct(seq(1, 4, 0), 100))
			h.step() // 1 runs
			ready := make(chan struct{})
			held := distinct(seq(2, 7, 0), 200)
			held.Ready = ready
			h.s.Add(held)
			h.s.Add(distinct(seq(3, 4, 0), 300))
			if got := ids(h.step()); !slices.Equal(got, tc.step1) {
				t.Fatalf("step 1 planned %v, want %v", got, tc.step1)
			}
			close(ready)
			h.s.Add(distinct(seq(4, 4, 0), 400)) // arrives after 2
			c, order := chunks(h.step())
			if c[2] != tc.chunk || c[4] != 0 || order[0] != 1 {
				t.Fatalf("step 2 planned %v (chunks %v), want the decodes first, then %d tokens of 2, 4 still waiting", order, c, tc.chunk)
			}
			if held.Ready != nil {
				t.Fatal("a closed Ready was kept")
			}
		})
	}
}

// TestFCFSByArrival: a request that arrived first in the system (Arrived)
// but reached the worker after a later one had started prefilling takes
// the budget ahead of it; decodes keep theirs, and without arrival times
// the order of Add decides, as before.
func TestFCFSByArrival(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		early, late int64 // Arrived of the short prompt (added second) and the long one
		step2       []uint64
	}{
		{"arrived first, added second", 100, 200, []uint64{1, 3, 2}},
		{"arrived second", 300, 200, []uint64{1, 2}},
		{"no arrival times", 0, 0, []uint64{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, 64, Config{MaxBatchTokens: 8, MaxRunning: 8})
			dec := distinct(seq(1, 3, 0), 100)
			dec.Arrived = min(tc.early, tc.late) - 1
			h.s.Add(dec)
			h.step() // 1's prompt: it decodes from now on
			long := distinct(seq(2, 40, 0), 200)
			long.Arrived = tc.late
			h.s.Add(long)
			h.step() // 1 decodes, 2 starts its prefill
			short := distinct(seq(3, 4, 0), 300)
			short.Arrived = tc.early
			h.s.Add(short)
			c, order := chunks(h.step())
			if !slices.Equal(order, tc.step2) {
				t.Fatalf("planned %v (chunks %v), want %v", order, c, tc.step2)
			}
			if c[1] != 1 {
				t.Fatalf("the decode got %d tokens, want 1", c[1])
			}
			if slices.Contains(order, 3) && (c[3] != 4 || c[2] != 3) {
				t.Fatalf("chunks %v: want the short prompt's 4 tokens, then 3 of the long one's", c)
			}
		})
	}
}

// TestAdmitHook: the hook sees each sequence once, when it reaches
// admission, with the blocks cached for it then; a channel it returns
// holds the sequence in its place until closed, after which it is
// admitted without the hook being asked again.
func TestAdmitHook(t *testing.T) {
	t.Parallel()
	h := newHarness(t, 64, Config{MaxBatchTokens: 16, MaxRunning: 8})
	calls := map[uint64]int{}
	ready := make(chan struct{})
	h.s.SetAdmitHook(func(q *Seq, cached int) <-chan struct{} {
		calls[q.ID]++
		if cached != 0 {
			t.Errorf("sequence %d: %d blocks cached; want 0", q.ID, cached)
		}
		if q.ID == 1 {
			return ready
		}
		return nil
	})
	h.s.Add(distinct(seq(1, 8, 0), 100))
	h.s.Add(distinct(seq(2, 4, 0), 200))
	if got := ids(h.step()); len(got) != 0 {
		t.Fatalf("planned %v while the head's blocks load; want nothing (first come, first served)", got)
	}
	close(ready)
	if got := ids(h.step()); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("planned %v after the load; want 1 then 2", got)
	}
	h.step()
	if calls[1] != 1 || calls[2] != 1 {
		t.Fatalf("hook calls %v; want one a sequence", calls)
	}
}
