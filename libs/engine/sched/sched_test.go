package sched

import (
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

func BenchmarkSchedule64(b *testing.B) {
	kv, _ := kvcache.New(kvcache.Config{NumBlocks: 4096, BlockSize: 16})
	s, _ := New(Config{MaxBatchTokens: 4096, MaxRunning: 64}, kv)
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
