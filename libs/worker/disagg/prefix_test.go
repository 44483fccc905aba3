package disagg

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"connectrpc.com/connect"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/sample"
	"switchyard.dev/libs/nixl"
)

// testPrefixPull: a worker that pulls a prompt's leading blocks from the
// worker holding them (the stack's exporter engine, here the holder)
// prefills only the rest and produces the aggregated greedy output; a
// holder that holds less, or nothing, than the router said, a failing
// holder, and -disagg=off all still give that output, and every block
// goes back on both sides.
func testPrefixPull(t *testing.T, backend func(testing.TB) nixl.BackendFactory) {
	const bs = 4
	prefix := prompts(1, 1, 41)[0]
	for len(prefix) < 12*bs { // 12 full blocks the holder caches
		prefix = append(prefix, uint32(3+(len(prefix)*13)%(shape.VocabSize-3)))
	}
	prompt := append(slices.Clone(prefix), 7, 8, 9, 10, 11, 12) // 13 full blocks and a tail
	stop := engine.StopParams{MaxTokens: 6, IgnoreEOS: true}
	// Logprobs too, bit for bit: a tiny model's greedy tokens can survive
	// wrong KV, its logprobs cannot.
	sp := sample.Params{Logprobs: true, TopLogprobs: 2}
	for _, tc := range []struct {
		name       string
		holds      int // blocks of prefix the holder caches
		said       int // blocks the router says it holds
		mode       string
		fail       bool
		path       string
		wantCached int // prompt tokens the puller's engine reports cached
	}{
		{name: "pulls what the holder has", holds: 12, said: 12, mode: ModeAuto, path: PathPulled, wantCached: 12 * bs},
		{name: "router said more", holds: 12, said: 40, mode: ModeAuto, path: PathPulled, wantCached: 12 * bs},
		{name: "router said less", holds: 12, said: 5, mode: ModeAuto, path: PathPulled, wantCached: 5 * bs},
		{name: "holder has fewer", holds: 3, said: 12, mode: ModeAuto, path: PathPulled, wantCached: 3 * bs},
		{name: "holder has none", holds: 0, said: 12, mode: ModeAuto, path: PathLocal},
		{name: "holder fails", holds: 12, said: 12, mode: ModeAuto, fail: true, path: PathFallback},
		{name: "disagg off", holds: 12, said: 12, mode: ModeOff, path: PathLocal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var wrap func(Prefiller) Prefiller
			if tc.fail {
				wrap = func(p Prefiller) Prefiller { return failingHolder{p} }
			}
			s := newStack(t, stackOpts{backend: backend, threshold: 1 << 20, wrap: wrap})
			s.decoder.cfg.Mode = tc.mode
			want, wantLPs := collectLogprobs(t, s.ref, engine.Request{ID: "ref", Prompt: prompt, Sampling: sp, Stop: stop}, prep{})
			if tc.holds > 0 {
				collect(t, s.pre, engine.Request{ID: "warm", Prompt: append(slices.Clone(prefix[:tc.holds*bs]), 1), Stop: engine.StopParams{MaxTokens: 1, IgnoreEOS: true}}, prep{})
			}
			r := engine.Request{ID: "r", Prompt: prompt, Sampling: sp, Stop: stop}
			h := hooks(s.decoder.Prepare(t.Context(), &r, "", "holder", tc.said))
			if r.FirstToken != nil {
				t.Fatal("a prefix pull set the first token")
			}
			st, err := s.dec.Submit(t.Context(), r)
			if err != nil {
				h.first(nil)
				t.Fatal(err)
			}
			h.submitted()
			var got []uint32
			var lps []sample.Logprob
			var cached int
			for n := 0; ; n++ {
				o, err := st.Recv(t.Context())
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					h.first(&o)
				}
				got = append(got, o.TokenIDs...)
				lps = append(lps, o.Logprobs...)
				if o.Finish != "" {
					cached = o.Usage.CachedPromptTokens
					break
				}
			}
			if !slices.Equal(got, want) || !reflect.DeepEqual(lps, wantLPs) {
				t.Fatalf("tokens %v %+v, want the aggregated %v %+v", got, lps, want, wantLPs)
			}
			if cached != tc.wantCached {
				t.Fatalf("%d prompt tokens cached, want %d", cached, tc.wantCached)
			}
			if s.obs.count(tc.path) != 1 {
				t.Fatalf("TTFT paths %v, want one %s", s.obs.paths, tc.path)
			}
			waitIdle(t, "puller", s.dec)
			waitIdle(t, "holder", s.pre)
			if q := s.decoder.Quarantined(); q != 0 && !tc.fail {
				t.Fatalf("%d blocks quarantined", q)
			}
		})
	}
}

// failingHolder's ExportPrefix fails after the holder wrote: the puller
// must not commit what it cannot trust.
type failingHolder struct{ Prefiller }

func (f failingHolder) ExportPrefix(ctx context.Context, req *connect.Request[workerv1.ExportPrefixRequest]) (*connect.Response[workerv1.ExportPrefixResponse], error) {
	if _, err := f.Prefiller.ExportPrefix(ctx, req); err != nil {
		return nil, err
	}
	return nil, connect.NewError(connect.CodeUnavailable, errInjected)
}
