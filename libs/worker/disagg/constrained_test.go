package disagg

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"connectrpc.com/connect"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/sample"
	"switchyard.dev/libs/nixl"
)

// constrainedFormats are structured outputs whose first token depends on
// the budget: with one token left, only a value that one token completes
// fits (a digit), while the decode worker's budget allows a string, an
// object, whitespace.
var constrainedFormats = []sample.Format{
	{JSONSchema: `{"anyOf":[{"type":"integer"},{"type":"string","minLength":12}]}`},
	{JSONSchema: `{"type":"object","properties":{"name":{"type":"string","maxLength":10},"n":{"type":"integer","minimum":-5,"maximum":500},` +
		`"tags":{"type":"array","items":{"enum":["a","b"]},"minItems":1,"maxItems":3}},"required":["name","tags"]}`},
	{JSONObject: true},
}

// testConstrained: structured output (JSON schemas and json_object,
// greedy and seeded temperature 1) is byte-identical with a remote
// prefill and without: the prefill worker masks the first token for the
// decode worker's budget (output_budget). A prefill worker that does not
// get it (an older decode worker) masks for its own one token and draws
// other first tokens, which the decode engine counts as mismatches.
func testConstrained(t *testing.T, backend func(testing.TB) nixl.BackendFactory) {
	s := newStack(t, stackOpts{backend: backend, threshold: 8})
	var ps [][]uint32
	for _, p := range prompts(40, 200, 21) {
		if len(p) > 40 {
			ps = append(ps, p)
		}
	}
	requests := func() []engine.Request {
		var rs []engine.Request
		for i, p := range ps[:12] {
			sp := sample.Params{Format: constrainedFormats[i%len(constrainedFormats)]}
			if i%2 == 1 {
				sp.Temperature, sp.Seed = 1, new(uint64(i))
			}
			rs = append(rs, engine.Request{ID: fmt.Sprint("c", i), Prompt: p, Sampling: sp, Stop: engine.StopParams{MaxTokens: 90}})
		}
		return rs
	}
	for _, r := range requests() {
		want := collect(t, s.ref, r, prep{})
		got := s.generate(t, r)
		if !slices.Equal(got, want) {
			t.Errorf("%s (format %+v): disaggregated %q, aggregated %q", r.ID, r.Sampling.Format, bytesOf(got), bytesOf(want))
		}
		if !json.Valid(bytesOf(want)) {
			t.Errorf("%s: not JSON: %q", r.ID, bytesOf(want))
		}
	}
	if n := s.obs.count(PathRemote); n < 10 {
		t.Errorf("%d remote prefills of 12", n)
	}
	if m := s.dec.Metrics(); m.FirstTokenMismatches != 0 {
		t.Errorf("%d first tokens differ from the decode engine's own", m.FirstTokenMismatches)
	}

	old := newStack(t, stackOpts{backend: backend, threshold: 8, wrap: func(p Prefiller) Prefiller { return noBudget{p} }})
	for _, r := range requests() {
		old.generate(t, r)
	}
	if m := old.dec.Metrics(); m.FirstTokenMismatches == 0 {
		t.Error("without output_budget no first token differed: the test shows nothing")
	}
	waitIdle(t, "decode", s.dec)
	waitIdle(t, "prefill", s.pre)
}

// bytesOf is the text of the tiny random model's byte tokens.
func bytesOf(toks []uint32) []byte {
	out := make([]byte, 0, len(toks))
	for _, t := range toks {
		if t >= 3 && t < 259 {
			out = append(out, byte(t-3))
		}
	}
	return out
}

// noBudget strips output_budget, as a decode worker that predates it
// sends.
type noBudget struct{ Prefiller }

func (n noBudget) RemotePrefill(ctx context.Context, req *connect.Request[workerv1.RemotePrefillRequest]) (*connect.Response[workerv1.RemotePrefillResponse], error) {
	req.Msg.OutputBudget = 0
	return n.Prefiller.RemotePrefill(ctx, req)
}
