package disagg

import (
	"context"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/sample"
	"switchyard.dev/libs/nixl"
)

// runContract is the suite every transfer backend passes.
func runContract(t *testing.T, backend func(testing.TB) nixl.BackendFactory) {
	t.Run("exact", func(t *testing.T) { t.Parallel(); testExact(t, backend) })
	t.Run("fallback", func(t *testing.T) { t.Parallel(); testFallback(t, backend) })
	t.Run("late writer", func(t *testing.T) { t.Parallel(); testLateWriter(t, backend) })
	t.Run("logprobs", func(t *testing.T) { t.Parallel(); testLogprobs(t, backend) })
	t.Run("order", func(t *testing.T) { t.Parallel(); testOrder(t, backend) })
	t.Run("full pool", func(t *testing.T) { t.Parallel(); testFullPool(t, backend) })
	t.Run("prefix pull", func(t *testing.T) { t.Parallel(); testPrefixPull(t, backend) })
	t.Run("constrained", func(t *testing.T) { t.Parallel(); testConstrained(t, backend) })
}

// testFullPool: two requests whose imports take every free block of the
// decode pool, each then needing one more block for its tail, are both
// served, with the aggregated outputs. (Holding the imported blocks until
// the first output starved admission for good: nothing ran, so nothing
// was ever released.)
func testFullPool(t *testing.T, backend func(testing.TB) nixl.BackendFactory) {
	s := newStack(t, stackOpts{backend: backend, threshold: 8, decBlocks: 40})
	var rs []engine.Request
	var hs []prep
	for i, p := range prompts(2, 1, 9) {
		p = append(p, prompts(1, 1, uint64(10+i))[0]...)
		for len(p) < 81 { // 20 full blocks of 4 tokens, then the last token
			p = append(p, uint32(3+(len(p)*7+i*11)%(shape.VocabSize-3)))
		}
		r := engine.Request{ID: "r", Prompt: p, Stop: engine.StopParams{MaxTokens: 4, IgnoreEOS: true}}
		hs = append(hs, hooks(s.decoder.Prepare(t.Context(), &r, "prefill", "", 0)))
		rs = append(rs, r)
	}
	if got := s.obs.count(PathRemote) + s.obs.count(PathFallback); got != 0 {
		t.Fatalf("%d TTFT records before any output", got)
	}
	if free := s.dec.Metrics().KVTotalBlocks - s.dec.Metrics().KVUsedBlocks; free != 0 {
		t.Fatalf("%d blocks free after both imports; the test wants none", free)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	streams := make([]*engine.Stream, len(rs))
	for i, r := range rs {
		st, err := s.dec.Submit(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		hs[i].submitted()
		streams[i] = st
	}
	for i, st := range streams {
		var got []uint32
		for n := 0; ; n++ {
			o, err := st.Recv(ctx)
			if err != nil {
				t.Fatalf("request %d: %v (never admitted?)", i, err)
			}
			if n == 0 {
				hs[i].first(&o)
			}
			got = append(got, o.TokenIDs...)
			if o.Finish != "" {
				break
			}
		}
		if want := collect(t, s.ref, rs[i], prep{}); !slices.Equal(got, want) {
			t.Errorf("request %d: %v, aggregated %v", i, got, want)
		}
	}
	if n := s.obs.count(PathRemote); n != 2 {
		t.Errorf("%d remote prefills, want 2", n)
	}
}

// testLogprobs: a remotely prefilled request's logprobs, the first token's
// included (the decode engine computes it from its own logits), equal the
// aggregated run's bit for bit; the prefill worker is not asked for them.
func testLogprobs(t *testing.T, backend func(testing.TB) nixl.BackendFactory) {
	var asked atomic.Int32
	s := newStack(t, stackOpts{backend: backend, threshold: 8, wrap: func(p Prefiller) Prefiller {
		return spy{p, func(req *workerv1.RemotePrefillRequest) {
			if req.GetSampling().GetLogprobs() || req.GetSampling().GetTopLogprobs() != 0 {
				asked.Add(1)
			}
		}}
	}})
	for i, p := range prompts(12, 200, 7) {
		r := engine.Request{ID: "r", Prompt: p, Sampling: sample.Params{Logprobs: true, TopLogprobs: 2}, Stop: engine.StopParams{MaxTokens: 6, IgnoreEOS: true}}
		wantToks, want := collectLogprobs(t, s.ref, r, prep{})
		gotToks, got := collectLogprobs(t, s.dec, r, hooks(s.decoder.Prepare(t.Context(), &r, "prefill", "", 0)))
		if !slices.Equal(gotToks, wantToks) || !reflect.DeepEqual(got, want) || len(got) != len(gotToks) {
			t.Errorf("prompt %d (%d tokens): disaggregated %v %+v, aggregated %v %+v", i, len(p), gotToks, got, wantToks, want)
		}
	}
	if s.obs.count(PathRemote) == 0 || asked.Load() != 0 {
		t.Errorf("%d remote prefills, %d asked for logprobs: want some, none", s.obs.count(PathRemote), asked.Load())
	}
}

// testOrder: a remote prefill carries the request's priority and arrival,
// so the prefill worker orders prompts as the decode worker would; a
// request without an arrival carries the decode worker's receipt.
func testOrder(t *testing.T, backend func(testing.TB) nixl.BackendFactory) {
	var seen []*workerv1.RemotePrefillRequest
	var mu sync.Mutex
	s := newStack(t, stackOpts{backend: backend, threshold: 8, wrap: func(p Prefiller) Prefiller {
		return spy{p, func(req *workerv1.RemotePrefillRequest) { mu.Lock(); seen = append(seen, req); mu.Unlock() }}
	}})
	arrived := time.Unix(1_700_000_000, 123)
	var ps [][]uint32 // long enough to be prefilled remotely
	for _, p := range prompts(20, 200, 13) {
		if len(p) >= 100 && len(ps) < 2 {
			ps = append(ps, p)
		}
	}
	for i, r := range []engine.Request{
		{ID: "routed", Prompt: ps[0], Priority: 3, Arrival: arrived, Stop: engine.StopParams{MaxTokens: 2, IgnoreEOS: true}},
		{ID: "unrouted", Prompt: ps[1], Stop: engine.StopParams{MaxTokens: 2, IgnoreEOS: true}},
	} {
		before := time.Now()
		got := collect(t, s.dec, r, hooks(s.decoder.Prepare(t.Context(), &r, "prefill", "", 0)))
		if want := collect(t, s.ref, r, prep{}); !slices.Equal(got, want) {
			t.Errorf("request %d: %v, aggregated %v", i, got, want)
		}
		mu.Lock()
		if len(seen) != i+1 {
			mu.Unlock()
			t.Fatalf("%d remote prefills after request %d, want %d", len(seen), i, i+1)
		}
		m := seen[i]
		mu.Unlock()
		wantArrival := arrived.UnixNano()
		if r.Arrival.IsZero() {
			if a := m.GetArrivalUnixNanos(); a < before.UnixNano() || a > time.Now().UnixNano() {
				t.Errorf("request %d: arrival %d, want the decode worker's receipt (between %d and now)", i, a, before.UnixNano())
			}
			wantArrival = m.GetArrivalUnixNanos()
		}
		if m.GetPriority() != int32(r.Priority) || m.GetArrivalUnixNanos() != wantArrival {
			t.Errorf("request %d: priority %d, arrival %d; want %d, %d", i, m.GetPriority(), m.GetArrivalUnixNanos(), r.Priority, wantArrival)
		}
		if e := prefillRequest(m); e.Priority != r.Priority || e.Arrival.UnixNano() != wantArrival {
			t.Errorf("request %d: the prefill worker runs priority %d, arrival %v; want %d, %d", i, e.Priority, e.Arrival, r.Priority, wantArrival)
		}
	}
	if e := prefillRequest(&workerv1.RemotePrefillRequest{}); !e.Arrival.IsZero() {
		t.Errorf("no arrival on the wire: engine arrival %v, want zero (at Submit)", e.Arrival)
	}
}

// spy sees each RemotePrefill request on its way.
type spy struct {
	Prefiller
	see func(*workerv1.RemotePrefillRequest)
}

func (s spy) RemotePrefill(ctx context.Context, req *connect.Request[workerv1.RemotePrefillRequest]) (*connect.Response[workerv1.RemotePrefillResponse], error) {
	s.see(req.Msg)
	return s.Prefiller.RemotePrefill(ctx, req)
}

// testLateWriter: the decode worker gives up on a prefill worker that then
// writes anyway (it never saw the cancellation). Its writes must be refused,
// not land in the released blocks: the decode arena is unchanged, the
// output is exact, and no block leaks.
func testLateWriter(t *testing.T, backend func(testing.TB) nixl.BackendFactory) {
	late := &lateWriter{release: make(chan struct{}), done: make(chan error, 1)}
	s := newStack(t, stackOpts{backend: backend, threshold: 8, wrap: func(p Prefiller) Prefiller { late.p, late.Prefiller = p, p; return late }})
	p := prompts(1, 200, 11)[0]
	p = append(p, prompts(1, 100, 12)[0]...)
	r := engine.Request{Prompt: p, Stop: engine.StopParams{MaxTokens: 6, IgnoreEOS: true}}
	want := collect(t, s.ref, r, prep{})
	if got := s.generate(t, r); !slices.Equal(got, want) {
		t.Errorf("after the prefill worker was given up on: %v, want %v", got, want)
	}
	if s.obs.count(PathFallback) != 1 {
		t.Fatalf("paths %v, want one fallback", s.obs.paths)
	}
	waitIdle(t, "decode", s.dec) // the quarantined blocks are released too
	if n := s.decoder.Quarantined(); n != 0 {
		t.Fatalf("%d blocks still quarantined", n)
	}
	before := slices.Clone(s.dec.KV().Arena)
	close(late.release) // now the prefill worker computes and writes
	err := <-late.done
	if err == nil {
		t.Fatal("the late prefill succeeded: its writes landed after the decode worker released the blocks")
	}
	t.Logf("late prefill: %v", err)
	if !slices.Equal(before, s.dec.KV().Arena) {
		t.Fatal("late writes changed the decode worker's arena")
	}
	waitIdle(t, "prefill", s.pre)
}

// lateWriter fails the RPC at once, as a decode-side timeout does, while
// the prefill worker goes on (after release) with the request it got.
type lateWriter struct {
	Prefiller // ExportPrefix
	p         Prefiller
	release   chan struct{}
	done      chan error
}

func (l *lateWriter) RemotePrefill(ctx context.Context, req *connect.Request[workerv1.RemotePrefillRequest]) (*connect.Response[workerv1.RemotePrefillResponse], error) {
	go func() {
		<-l.release
		_, err := l.p.RemotePrefill(context.WithoutCancel(ctx), req)
		l.done <- err
	}()
	return nil, connect.NewError(connect.CodeDeadlineExceeded, errInjected)
}

// testExact: greedy output with disaggregated prefill equals aggregated
// output for 100 prompts of 1..240 tokens, most of them prefilled
// remotely, 4 at a time; no KV block stays held on either side.
func testExact(t *testing.T, backend func(testing.TB) nixl.BackendFactory) {
	s := newStack(t, stackOpts{backend: backend, threshold: 8})
	ps := prompts(100, 240, 42)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, p := range ps {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			r := engine.Request{ID: "r", Prompt: p, Stop: engine.StopParams{MaxTokens: 8, IgnoreEOS: true}}
			want := collect(t, s.ref, r, prep{})
			got := s.generate(t, r)
			if !slices.Equal(got, want) {
				t.Errorf("prompt %d (%d tokens): disaggregated %v, aggregated %v", i, len(p), got, want)
			}
		})
	}
	wg.Wait()
	remote, local, fb := s.obs.count(PathRemote), s.obs.count(PathLocal), s.obs.count(PathFallback)
	t.Logf("remote %d, local %d, fallback %d", remote, local, fb)
	if remote < 70 || fb != 0 {
		t.Errorf("remote %d fallback %d: want most remote and no fallback", remote, fb)
	}
	if m := s.dec.Metrics(); m.FirstTokenMismatches != 0 {
		t.Errorf("%d first tokens differ from the decode engine's own", m.FirstTokenMismatches)
	}
	waitIdle(t, "decode", s.dec)
	waitIdle(t, "prefill", s.pre)
}

// testFallback: when the prefill worker fails (deadline mid-transfer,
// transfer agent gone, response lost after the write, short write) or the
// engine refuses the import, the request is prefilled locally with
// identical output and no block leaks.
func testFallback(t *testing.T, backend func(testing.TB) nixl.BackendFactory) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		wrap    func(Prefiller) Prefiller
		engine  func(DecodeEngine) DecodeEngine
		kill    bool
	}{
		{name: "deadline", timeout: time.Millisecond},
		{name: "killed mid-transfer", wrap: killAfter(2 * time.Millisecond)},
		{name: "agent gone", kill: true},
		{name: "response lost", wrap: func(p Prefiller) Prefiller {
			return fault{p, func(*workerv1.RemotePrefillResponse) error {
				return connect.NewError(connect.CodeUnavailable, errInjected)
			}}
		}},
		{name: "first token outside the vocabulary", wrap: func(p Prefiller) Prefiller {
			return fault{p, func(r *workerv1.RemotePrefillResponse) error { r.FirstTokenId = uint32(shape.VocabSize); return nil }}
		}},
		{name: "short write", wrap: func(p Prefiller) Prefiller {
			return fault{p, func(r *workerv1.RemotePrefillResponse) error { r.BlocksWritten--; return nil }}
		}},
		{name: "commit refused", engine: func(e DecodeEngine) DecodeEngine { return refuseCommit{e} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, stackOpts{backend: backend, threshold: 8, timeout: tc.timeout, wrap: tc.wrap, engine: tc.engine})
			if tc.kill {
				_ = s.preAgent.Close()
			}
			for i, p := range prompts(6, 300, 7) {
				if len(p) < 40 {
					p = append(p, prompts(1, 60, uint64(i))[0]...)
					p = append(p, make([]uint32, 40)...)
				}
				r := engine.Request{Prompt: p, Stop: engine.StopParams{MaxTokens: 6, IgnoreEOS: true}}
				want := collect(t, s.ref, r, prep{})
				if got := s.generate(t, r); !slices.Equal(got, want) {
					t.Errorf("prompt %d: after fallback %v, want %v", i, got, want)
				}
			}
			if s.obs.count(PathFallback) == 0 {
				t.Errorf("no fallback recorded: %v", s.obs.paths)
			}
			waitIdle(t, "decode", s.dec)
			waitIdle(t, "prefill", s.pre)
		})
	}
}

// fault post-processes a successful response.
type fault struct {
	p   Prefiller
	mod func(*workerv1.RemotePrefillResponse) error
}

func (f fault) ExportPrefix(ctx context.Context, req *connect.Request[workerv1.ExportPrefixRequest]) (*connect.Response[workerv1.ExportPrefixResponse], error) {
	return f.p.ExportPrefix(ctx, req)
}

func (f fault) RemotePrefill(ctx context.Context, req *connect.Request[workerv1.RemotePrefillRequest]) (*connect.Response[workerv1.RemotePrefillResponse], error) {
	res, err := f.p.RemotePrefill(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := f.mod(res.Msg); err != nil {
		return nil, err
	}
	return res, nil
}

// refuseCommit has the engine refuse every import commit (one token
// short), after which the import's references are still the decoder's to
// release.
type refuseCommit struct{ DecodeEngine }

func (r refuseCommit) CommitImportedAfter(parent uint64, blocks []int, tokens []uint32, salt uint64) ([]int, error) {
	return r.DecodeEngine.CommitImportedAfter(parent, blocks, tokens[1:], salt)
}

// killAfter cancels the prefill worker's side after d (as if the process
// died: its computation and writes stop) and reports the broken RPC.
func killAfter(d time.Duration) func(Prefiller) Prefiller {
	return func(p Prefiller) Prefiller { return killer{p, d} }
}

type killer struct {
	p Prefiller
	d time.Duration
}

func (k killer) ExportPrefix(ctx context.Context, req *connect.Request[workerv1.ExportPrefixRequest]) (*connect.Response[workerv1.ExportPrefixResponse], error) {
	return k.p.ExportPrefix(ctx, req)
}

func (k killer) RemotePrefill(ctx context.Context, req *connect.Request[workerv1.RemotePrefillRequest]) (*connect.Response[workerv1.RemotePrefillResponse], error) {
	ctx, cancel := context.WithTimeout(ctx, k.d)
	defer cancel()
	res, err := k.p.RemotePrefill(ctx, req)
	if err == nil && ctx.Err() != nil {
		err = connect.NewError(connect.CodeUnavailable, errInjected) // died before replying
	}
	return res, err
}
