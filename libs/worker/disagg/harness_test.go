package disagg

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"switchyard.dev/libs/engine/sample"

	"connectrpc.com/connect"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/llama"
	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/metadata"
)

// shape is a tiny random llama: fast under -race, long enough context for
// prompts of a few hundred tokens.
var shape = llama.Config{Dim: 32, HiddenDim: 64, NLayers: 2, NHeads: 4, NKVHeads: 2, VocabSize: 300, SeqLen: 512, SharedClassifier: true}

// newEngine starts an engine that prefills in chunks of 32 tokens, so a
// long prompt commits blocks over several steps (streamed writes).
func newEngine(t testing.TB, c llama.Config, batchTokens int) *engine.Engine {
	return newEngineBlocks(t, c, batchTokens, 1024)
}

// newEngineBlocks is newEngine with a KV pool of numBlocks blocks.
func newEngineBlocks(t testing.TB, c llama.Config, batchTokens, numBlocks int) *engine.Engine {
	t.Helper()
	exec, err := llama.NewTinyRandom(c, 3, llama.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Shared KV memory, as a worker maps it for the ucx backend's UCX
	// process; every backend moves it alike.
	e, err := engine.New(engine.Config{BlockSize: 4, NumBlocks: numBlocks, MaxBatchTokens: batchTokens, SharedKV: runtime.GOOS == "linux"}, exec, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = e.Close() })
	return e
}

func newAgent(t testing.TB, name string, arena []byte, fs ...nixl.BackendFactory) (*nixl.Agent, nixl.RegionID) {
	t.Helper()
	a, err := nixl.NewAgent(nixl.Config{Name: name, Backends: fs})
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.RegisterMemory(arena)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = a.DeregisterMemory(ctx, id)
		_ = a.Close()
	})
	return a, id
}

// stack is a decode engine, a prefill engine, and a reference engine that
// serves everything locally (the aggregated baseline).
type stack struct {
	dec, pre, ref *engine.Engine
	decoder       *Decoder
	exporter      *Exporter
	preAgent      *nixl.Agent
	decAgent      *nixl.Agent
	obs           *recorder
}

type stackOpts struct {
	backend   func(t testing.TB) nixl.BackendFactory
	fallback  func(t testing.TB) nixl.BackendFactory // a second backend, if any
	threshold int
	timeout   time.Duration
	wrap      func(Prefiller) Prefiller
	engine    func(DecodeEngine) DecodeEngine // wraps the decode engine
	decBlocks int                             // the decode engine's KV pool (default 1024)
	check     func(context.Context, *metadata.Agent) error
}

func newStack(t testing.TB, o stackOpts) *stack {
	s := &stack{dec: newEngineBlocks(t, shape, 32, cmp.Or(o.decBlocks, 1024)), pre: newEngine(t, shape, 32), ref: newEngine(t, shape, 32), obs: &recorder{}}
	backends := func() []nixl.BackendFactory {
		fs := []nixl.BackendFactory{o.backend(t)}
		if o.fallback != nil {
			fs = append(fs, o.fallback(t))
		}
		return fs
	}
	da, _ := newAgent(t, t.Name()+"-decode", s.dec.KV().Arena, backends()...)
	pa, pr := newAgent(t, t.Name()+"-prefill", s.pre.KV().Arena, backends()...)
	s.preAgent = pa
	s.decAgent = da
	s.exporter = NewExporter(ExportConfig{Engine: s.pre, Agent: pa, Region: pr, CheckTarget: o.check})
	var p Prefiller = direct{s.exporter}
	if o.wrap != nil {
		p = o.wrap(p)
	}
	var de DecodeEngine = s.dec
	if o.engine != nil {
		de = o.engine(de)
	}
	s.decoder = NewDecoder(DecodeConfig{Engine: de, Model: "m", Agent: da, Mode: ModeAuto,
		Threshold: o.threshold, Timeout: o.timeout, Observer: s.obs, Dial: func(string) Prefiller { return p }})
	return s
}

// direct calls an Exporter in-process, standing in for the RPC.
type direct struct{ x *Exporter }

func (d direct) RemotePrefill(ctx context.Context, req *connect.Request[workerv1.RemotePrefillRequest]) (*connect.Response[workerv1.RemotePrefillResponse], error) {
	res, err := d.x.Prefill(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(res), nil
}

func (d direct) ExportPrefix(ctx context.Context, req *connect.Request[workerv1.ExportPrefixRequest]) (*connect.Response[workerv1.ExportPrefixResponse], error) {
	res, err := d.x.ExportPrefix(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(res), nil
}

type recorder struct {
	mu    sync.Mutex
	paths map[string]int
	last  Phases
}

func (r *recorder) ObserveTTFT(_ context.Context, p Phases) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.paths == nil {
		r.paths = map[string]int{}
	}
	r.paths[p.Path]++
	r.last = p
}

func (r *recorder) count(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.paths[path]
}

// generate serves r on the decode engine the way the worker handler does.
func (s *stack) generate(t testing.TB, r engine.Request) []uint32 {
	t.Helper()
	return collect(t, s.dec, r, hooks(s.decoder.Prepare(t.Context(), &r, "prefill", "", 0)))
}

// prep is what Prepare returned for a request (zero: served without it).
type prep struct {
	submitted func()
	first     func(*engine.Output)
}

func hooks(submitted func(), first func(*engine.Output)) prep { return prep{submitted, first} }

func collect(t testing.TB, e *engine.Engine, r engine.Request, h prep) []uint32 {
	t.Helper()
	toks, _ := collectLogprobs(t, e, r, h)
	return toks
}

// collectLogprobs is collect that also returns the outputs' logprobs.
func collectLogprobs(t testing.TB, e *engine.Engine, r engine.Request, h prep) ([]uint32, []sample.Logprob) {
	t.Helper()
	first := h.first
	st, err := e.Submit(t.Context(), r)
	if err != nil {
		if first != nil {
			first(nil)
		}
		t.Fatal(err)
	}
	if h.submitted != nil {
		h.submitted()
	}
	var toks []uint32
	var lps []sample.Logprob
	for n := 0; ; n++ {
		o, err := st.Recv(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 && first != nil {
			first(&o)
		}
		if o.Finish == engine.FinishError {
			t.Fatalf("request failed: %v", o.Err)
		}
		toks = append(toks, o.TokenIDs...)
		lps = append(lps, o.Logprobs...)
		if o.Finish != "" {
			return toks, lps
		}
	}
}

// prompts returns n prompts of 1..maxLen tokens; every third one extends
// an earlier one, so prefix caches on both sides get hits.
func prompts(n, maxLen int, seed uint64) [][]uint32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([][]uint32, n)
	for i := range out {
		l := 1 + rng.IntN(maxLen)
		p := make([]uint32, 0, l)
		if i%3 == 2 {
			prev := out[rng.IntN(i)]
			p = append(p, prev[:min(len(prev), l/2)]...)
		}
		for len(p) < l {
			p = append(p, uint32(3+rng.IntN(shape.VocabSize-3)))
		}
		out[i] = p
	}
	return out
}

// waitIdle waits until e holds no blocks (frees happen on the engine
// loop, after the stream ended).
func waitIdle(t testing.TB, name string, e *engine.Engine) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for e.Metrics().KVUsedBlocks != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s engine still holds %d KV blocks", name, e.Metrics().KVUsedBlocks)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var errInjected = errors.New("injected failure")
