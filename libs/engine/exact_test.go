package engine

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"

	"switchyard.dev/libs/engine/sample"
	"switchyard.dev/libs/engine/sched"
)

const storiesRef = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. She wanted to play with it, but it was too high."

func TestStoriesReference(t *testing.T) {
	t.Parallel()
	e := start(t, Config{}, stories(t))
	p := e.Tokenizer().Encode("Once upon a time", true, false)
	r := run(t, e, Request{ID: "ref", Prompt: p, Stop: StopParams{MaxTokens: 60}})
	full := "Once upon a time" + r.text
	if !strings.HasPrefix(full, storiesRef) && !strings.HasPrefix(storiesRef, full) {
		t.Fatalf("output differs from run.c:\n got: %q\nwant: %q", full, storiesRef)
	}
	if len(full) < len(storiesRef) || r.final.Finish != FinishLength || r.final.Usage.CompletionTokens != 60 {
		t.Fatalf("finish %q usage %+v text %q", r.final.Finish, r.final.Usage, full)
	}
}

func TestStoriesStopsOnBOS(t *testing.T) {
	t.Parallel()
	e := start(t, Config{}, stories(t))
	p := e.Tokenizer().Encode("Once upon a time", true, false)
	r := run(t, e, Request{Prompt: p, Stop: StopParams{MaxTokens: 500}})
	if r.final.Finish != FinishStop || r.final.Usage.CompletionTokens >= 500 {
		t.Fatalf("finish %q after %d tokens", r.final.Finish, r.final.Usage.CompletionTokens)
	}
	ig := run(t, e, Request{Prompt: p, Stop: StopParams{MaxTokens: r.final.Usage.CompletionTokens + 5, IgnoreEOS: true}})
	if ig.final.Finish != FinishLength || !strings.HasPrefix(ig.text, r.text) {
		t.Fatalf("ignore_eos: finish %q", ig.final.Finish)
	}
}

// TestGreedyInvariance checks one prompt's greedy output across prefill
// strategies and batch company, for every executor.
func TestGreedyInvariance(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			p := prompt(40, 1)
			req := Request{Prompt: p, Stop: StopParams{MaxTokens: 24, IgnoreEOS: true}}
			ref := run(t, start(t, Config{}, b.new(t)), req)
			if len(ref.tokens) != 24 {
				t.Fatalf("reference produced %d tokens", len(ref.tokens))
			}
			check := func(name string, got result) {
				t.Helper()
				if !sameTokens(got.tokens, ref.tokens) {
					t.Errorf("%s: tokens %v, want %v", name, got.tokens, ref.tokens)
				}
			}
			check("chunked", run(t, start(t, Config{MaxBatchTokens: 7}, b.new(t)), req))
			e := start(t, Config{}, b.new(t))
			run(t, e, Request{Prompt: p[:35], Stop: StopParams{MaxTokens: 1}})
			hit := run(t, e, req)
			check("prefix hit", hit)
			if hit.final.Usage.CachedPromptTokens != 32 {
				t.Errorf("cached prompt tokens = %d, want 32", hit.final.Usage.CachedPromptTokens)
			}
			check("batched", batchOf16(t, start(t, Config{MaxBatchTokens: 64}, b.new(t)), req))
			check("batched, prefill chunks capped", batchOf16(t, start(t, Config{MaxBatchTokens: 64, LongPrefillTokens: 5}, b.new(t)), req))
			check("batched, shortest prompt first", batchOf16(t, start(t, Config{MaxBatchTokens: 16, PrefillOrder: sched.OrderShortest}, b.new(t)), req))
		})
	}
}

// batchOf16 runs req among 15 other greedy and sampled requests.
func batchOf16(t *testing.T, e *Engine, req Request) result {
	var wg sync.WaitGroup
	results := make([]result, 16)
	for i := range 16 {
		r := req
		if i > 0 {
			r = Request{Prompt: prompt(10+i*3, i+5), Stop: StopParams{MaxTokens: 5 + i, IgnoreEOS: true}}
			if i%2 == 0 {
				r.Sampling = sample.Params{Temperature: 0.9, TopP: 0.9, Seed: seed(uint64(i))}
			}
		}
		st, err := e.Submit(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = collect(t, st) }()
	}
	wg.Wait()
	return results[0]
}

func TestSeededSamplingReproducible(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			req := Request{Prompt: prompt(20, 3), Stop: StopParams{MaxTokens: 16, IgnoreEOS: true},
				Sampling: sample.Params{Temperature: 1.0, TopP: 0.95, TopK: 50, Seed: seed(42)}}
			a := run(t, start(t, Config{}, b.new(t)), req)
			bb := batchOf16(t, start(t, Config{MaxBatchTokens: 9}, b.new(t)), req)
			if !sameTokens(a.tokens, bb.tokens) {
				t.Fatalf("seeded runs differ:\n%v\n%v", a.tokens, bb.tokens)
			}
		})
	}
}

// TestPreemptionUnderPressure runs many requests through a pool far too
// small for all of them: everyone must finish, with unchanged output.
func TestPreemptionUnderPressure(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			reqs := make([]Request, 10)
			for i := range reqs {
				reqs[i] = Request{Prompt: prompt(12+i, i), Stop: StopParams{MaxTokens: 20, IgnoreEOS: true}}
			}
			free := start(t, Config{}, b.new(t))
			want := make([]result, len(reqs))
			for i, r := range reqs {
				want[i] = run(t, free, r)
			}
			for _, order := range []string{sched.OrderFCFS, sched.OrderShortest} {
				t.Run(order, func(t *testing.T) {
					tight := start(t, Config{BlockSize: 4, NumBlocks: 16, MaxBatchTokens: 32, PrefillOrder: order}, b.new(t))
					underPressure(t, tight, reqs, want)
				})
			}
		})
	}
}

// underPressure runs reqs at once on tight, an engine short of KV blocks,
// and checks each against want, that blocks were preempted, and that none
// leaked.
func underPressure(t *testing.T, tight *Engine, reqs []Request, want []result) {
	t.Helper()
	var wg sync.WaitGroup
	got := make([]result, len(reqs))
	for i, r := range reqs {
		st, err := tight.Submit(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); got[i] = collect(t, st) }()
	}
	wg.Wait()
	for i := range reqs {
		if got[i].final.Finish != FinishLength || !sameTokens(got[i].tokens, want[i].tokens) {
			t.Errorf("request %d: finish %q err %v tokens %v, want %v", i, got[i].final.Finish, got[i].final.Err, got[i].tokens, want[i].tokens)
		}
	}
	m := tight.Metrics()
	if m.Preemptions == 0 {
		t.Error("expected preemptions under pressure")
	}
	if m.KVUsedBlocks != 0 || m.Running != 0 || m.Waiting != 0 {
		t.Errorf("leftover state %+v", m)
	}
}

// TestLogprobs: a greedy token is its position's most likely one, and,
// for a given block size, the logprobs are bit-identical whether the
// prompt was prefilled in one step, in chunks, from a prefix hit, in a
// batch, under preemption, or with the first token given by a
// (disaggregated) prefill worker. An executor without logits refuses them.
func TestLogprobs(t *testing.T) {
	t.Parallel()
	b := backends()[0] // llama
	p := prompt(40, 2)
	req := Request{Prompt: p, Sampling: sample.Params{Logprobs: true, TopLogprobs: 4}, Stop: StopParams{MaxTokens: 20, IgnoreEOS: true}}
	ref := run(t, start(t, Config{}, b.new(t)), req)
	if len(ref.logprobs) != len(ref.tokens) || len(ref.tokens) != 20 {
		t.Fatalf("%d logprobs for %d tokens", len(ref.logprobs), len(ref.tokens))
	}
	for i, lp := range ref.logprobs {
		if lp.Logprob > 0 || len(lp.Top) != 4 || lp.Top[0].Token != ref.tokens[i] || lp.Top[0].Logprob != lp.Logprob {
			t.Fatalf("token %d (%d): %+v, want the top entry and logprob <= 0", i, ref.tokens[i], lp)
		}
	}
	same := func(name string, got result) {
		t.Helper()
		if !sameTokens(got.tokens, ref.tokens) || !reflect.DeepEqual(got.logprobs, ref.logprobs) {
			t.Errorf("%s: tokens %v logprobs %+v,\nwant %v %+v", name, got.tokens, got.logprobs, ref.tokens, ref.logprobs)
		}
	}
	same("chunked", run(t, start(t, Config{MaxBatchTokens: 7}, b.new(t)), req))
	e := start(t, Config{}, b.new(t))
	run(t, e, Request{Prompt: p[:35], Stop: StopParams{MaxTokens: 1}})
	same("prefix hit", run(t, e, req))
	same("batched", batchOf16(t, start(t, Config{MaxBatchTokens: 64}, b.new(t)), req))
	first := ref.tokens[0]
	given := req
	given.FirstToken = &first
	same("first token given", run(t, start(t, Config{}, b.new(t)), given))

	tight := start(t, Config{BlockSize: 4, NumBlocks: 16, MaxBatchTokens: 32}, b.new(t))
	var wg sync.WaitGroup
	results := make([]result, 6)
	for i := range results {
		r := req
		r.Prompt = prompt(12+i, i)
		st, err := tight.Submit(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { results[i] = collect(t, st) })
	}
	wg.Wait()
	if tight.Metrics().Preemptions == 0 {
		t.Fatal("expected preemptions")
	}
	for i, got := range results {
		r := req
		r.Prompt = prompt(12+i, i)
		// Same block size: the attention kernel (SIMD or not) depends on
		// it, and with it the last bits of the logits.
		want := run(t, start(t, Config{BlockSize: 4}, b.new(t)), r)
		if !sameTokens(got.tokens, want.tokens) || !reflect.DeepEqual(got.logprobs, want.logprobs) {
			t.Errorf("preempted request %d: logprobs differ from an unpressured run:\n%v %+v\n%v %+v", i, got.tokens, got.logprobs, want.tokens, want.logprobs)
		}
	}

	if _, err := start(t, Config{}, backends()[1].new(t)).Submit(t.Context(), req); !errors.Is(err, ErrNoLogprobs) || !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("sim: Submit with logprobs = %v, want ErrNoLogprobs", err)
	} else if f := InvalidField(err); f != "sampling.logprobs" {
		t.Fatalf("sim: Submit with logprobs names field %q, want sampling.logprobs", f)
	}
	plain := run(t, start(t, Config{}, b.new(t)), Request{Prompt: p, Stop: req.Stop})
	if plain.logprobs != nil {
		t.Fatal("logprobs without asking")
	}
}
