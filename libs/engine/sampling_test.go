package engine

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"switchyard.dev/libs/engine/sample"
)

// storiesPrompt is the reference prompt, "Once upon a time".
func storiesPrompt(e *Engine) []uint32 { return e.Tokenizer().Encode("Once upon a time", true, false) }

// repeats counts the tokens of toks that already occurred in it.
func repeats(toks []uint32) int {
	seen := map[uint32]bool{}
	n := 0
	for _, t := range toks {
		if seen[t] {
			n++
		}
		seen[t] = true
	}
	return n
}

// TestLogitBias: a zero bias (or zero penalties) leaves greedy output as it
// is; +100 forces a token at every step; -100 on the greedy output's
// most frequent token bans it.
func TestLogitBias(t *testing.T) {
	t.Parallel()
	e := start(t, Config{}, stories(t))
	p := storiesPrompt(e)
	stop := StopParams{MaxTokens: 60, IgnoreEOS: true}
	ref := run(t, e, Request{Prompt: p, Stop: stop})
	if len(ref.tokens) != 60 {
		t.Fatalf("reference: %d tokens", len(ref.tokens))
	}
	counts := map[uint32]int{}
	for _, tok := range ref.tokens {
		counts[tok]++
	}
	common := ref.tokens[0]
	for tok, n := range counts {
		if n > counts[common] || (n == counts[common] && tok < common) {
			common = tok
		}
	}
	forced := uint32(300)
	if counts[forced] > 0 {
		t.Fatalf("token %d is in the reference already", forced)
	}
	tests := []struct {
		name  string
		p     sample.Params
		check func(t *testing.T, got []uint32)
	}{
		{"zero penalties, empty bias", sample.Params{LogitBias: map[uint32]float32{}}, func(t *testing.T, got []uint32) {
			if !sameTokens(got, ref.tokens) {
				t.Fatalf("tokens %v, want %v", got, ref.tokens)
			}
		}},
		{"zero bias", sample.Params{LogitBias: map[uint32]float32{common: 0, 7: 0}}, func(t *testing.T, got []uint32) {
			if !sameTokens(got, ref.tokens) {
				t.Fatalf("tokens %v, want %v", got, ref.tokens)
			}
		}},
		{"+100 forces", sample.Params{LogitBias: map[uint32]float32{forced: 100}}, func(t *testing.T, got []uint32) {
			for i, tok := range got {
				if tok != forced {
					t.Fatalf("token %d is %d, want %d every step: %v", i, tok, forced, got)
				}
			}
		}},
		{"-100 bans", sample.Params{LogitBias: map[uint32]float32{common: -100}}, func(t *testing.T, got []uint32) {
			if sameTokens(got, ref.tokens) || slices.Contains(got, common) {
				t.Fatalf("banned token %d: output %v, reference %v", common, got, ref.tokens)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, e, Request{Prompt: p, Sampling: tc.p, Stop: stop})
			if r.final.Finish != FinishLength || len(r.tokens) != 60 {
				t.Fatalf("finish %q err %v after %d tokens", r.final.Finish, r.final.Err, len(r.tokens))
			}
			tc.check(t, r.tokens)
		})
	}
}

// TestPenalties: presence and frequency penalties make the output repeat
// itself less, and, counting only emitted tokens, give the same tokens
// and (raw) logprobs alone, chunked, batched, with the first token given
// by a prefill worker, and under preemption, greedy or seeded.
func TestPenalties(t *testing.T) {
	t.Parallel()
	e := start(t, Config{}, stories(t))
	p := storiesPrompt(e)
	long := StopParams{MaxTokens: 200, IgnoreEOS: true}
	base := repeats(run(t, e, Request{Prompt: p, Stop: long}).tokens)
	for _, sp := range []sample.Params{{PresencePenalty: 1}, {FrequencyPenalty: 1}, {PresencePenalty: 0.5, FrequencyPenalty: 0.5}} {
		got := repeats(run(t, e, Request{Prompt: p, Sampling: sp, Stop: long}).tokens)
		if got >= base-10 {
			t.Errorf("presence %v frequency %v: %d repeated tokens of 200, %d without", sp.PresencePenalty, sp.FrequencyPenalty, got, base)
		}
	}

	for _, tc := range []struct {
		name string
		p    sample.Params
	}{
		{"greedy", sample.Params{PresencePenalty: 0.4, FrequencyPenalty: 0.8, LogitBias: map[uint32]float32{13: 3}, Logprobs: true, TopLogprobs: 2}},
		{"seeded", sample.Params{Temperature: 0.9, TopP: 0.95, Seed: seed(5), PresencePenalty: -0.5, FrequencyPenalty: 1.5, Logprobs: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := Request{Prompt: p, Sampling: tc.p, Stop: StopParams{MaxTokens: 40, IgnoreEOS: true}}
			ref := run(t, start(t, Config{}, stories(t)), req)
			if len(ref.tokens) != 40 || len(ref.logprobs) != 40 {
				t.Fatalf("reference: %d tokens, %d logprobs", len(ref.tokens), len(ref.logprobs))
			}
			same := func(name string, got result) {
				t.Helper()
				if !sameTokens(got.tokens, ref.tokens) || !reflect.DeepEqual(got.logprobs, ref.logprobs) {
					t.Errorf("%s: tokens %v, want %v (or logprobs differ)", name, got.tokens, ref.tokens)
				}
			}
			same("chunked", run(t, start(t, Config{MaxBatchTokens: 3}, stories(t)), req))
			same("batched", batchOf16(t, start(t, Config{MaxBatchTokens: 64}, stories(t)), req))
			given := req
			given.FirstToken = &ref.tokens[0]
			same("first token given", run(t, start(t, Config{}, stories(t)), given))
			penalisedUnderPressure(t, tc.p)
		})
	}
}

// penalisedUnderPressure runs six requests with sampling p at once in a
// pool too small for them, and checks each against a run alone.
func penalisedUnderPressure(t *testing.T, p sample.Params) {
	t.Helper()
	tight := start(t, Config{BlockSize: 4, NumBlocks: 16, MaxBatchTokens: 32}, stories(t))
	reqs := make([]Request, 6)
	got := make([]result, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		reqs[i] = Request{Prompt: prompt(12+i, i), Sampling: p, Stop: StopParams{MaxTokens: 20, IgnoreEOS: true}}
		st, err := tight.Submit(t.Context(), reqs[i])
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { got[i] = collect(t, st) })
	}
	wg.Wait()
	if tight.Metrics().Preemptions == 0 {
		t.Fatal("expected preemptions")
	}
	for i, r := range reqs {
		// Same block size: the attention kernel depends on it, and with
		// it the last bits of the logits.
		want := run(t, start(t, Config{BlockSize: 4}, stories(t)), r)
		if !sameTokens(got[i].tokens, want.tokens) || !reflect.DeepEqual(got[i].logprobs, want.logprobs) {
			t.Errorf("preempted request %d: tokens %v, alone %v (or logprobs differ)", i, got[i].tokens, want.tokens)
		}
	}
}

// allowConstraint allows only the tokens in allow and refuses (in Accept)
// the tokens in refuse; it records each Mask's budget.
type allowConstraint struct {
	allow, refuse map[uint32]bool
	mu            sync.Mutex
	lefts         []int
}

func (c *allowConstraint) Mask(logits []float32, left int) {
	c.mu.Lock()
	c.lefts = append(c.lefts, left)
	c.mu.Unlock()
	for i := range logits {
		if !c.allow[uint32(i)] {
			logits[i] = float32(math.Inf(-1))
		}
	}
}

func (c *allowConstraint) Accept(tok uint32) error {
	if c.refuse[tok] {
		return errors.New("not in the language")
	}
	return nil
}

// TestConstraintSeam: a request's constraint masks every step, with the
// budget bounded by max tokens and the context, and its refusal of an
// emitted token (here the prefill worker's first token) ends the request
// with an error.
func TestConstraintSeam(t *testing.T) {
	t.Parallel()
	e := start(t, Config{}, stories(t))
	p := storiesPrompt(e)
	allow := map[uint32]bool{300: true, 301: true, 302: true, 303: true}
	submit := func(r Request, c *allowConstraint) result {
		t.Helper()
		if err := e.validate(&r); err != nil {
			t.Fatal(err)
		}
		st, err := e.submit(t.Context(), r, c)
		if err != nil {
			t.Fatal(err)
		}
		return collect(t, st)
	}

	c := &allowConstraint{allow: allow}
	r := submit(Request{Prompt: p, Sampling: sample.Params{FrequencyPenalty: 1}, Stop: StopParams{MaxTokens: 12, IgnoreEOS: true}}, c)
	if r.final.Finish != FinishLength || len(r.tokens) != 12 {
		t.Fatalf("finish %q err %v after %d tokens", r.final.Finish, r.final.Err, len(r.tokens))
	}
	for _, tok := range r.tokens {
		if !allow[tok] {
			t.Fatalf("token %d is masked: %v", tok, r.tokens)
		}
	}
	if repeats(r.tokens) != 8 || !slices.Equal(c.lefts, []int{11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}) {
		t.Fatalf("tokens %v, Mask saw left %v", r.tokens, c.lefts)
	}

	c = &allowConstraint{allow: allow}
	room := e.maxLen - len(p)
	submit(Request{Prompt: p, Stop: StopParams{MaxTokens: room + 100, IgnoreEOS: true}}, c)
	if len(c.lefts) != room || c.lefts[0] != room-1 {
		t.Fatalf("context bound: %d masks, first left %v, want %d and %d", len(c.lefts), c.lefts[:1], room, room-1)
	}

	first := uint32(9)
	c = &allowConstraint{allow: allow, refuse: map[uint32]bool{first: true}}
	r = submit(Request{Prompt: p, FirstToken: &first, Stop: StopParams{MaxTokens: 5}}, c)
	if r.final.Finish != FinishError || r.final.Err == nil || !strings.Contains(r.final.Err.Error(), "output token 9 refused by the constraint: not in the language") || len(r.tokens) != 0 {
		t.Fatalf("refused first token: finish %q err %v tokens %v", r.final.Finish, r.final.Err, r.tokens)
	}
}

// TestValidateSampling: penalties, bias and formats are refused on an
// executor without logits, naming the field; bias ids out of the
// vocabulary and bad ranges are refused anywhere (bad formats:
// TestFormatErrors).
func TestValidateSampling(t *testing.T) {
	t.Parallel()
	llama, sim := start(t, Config{}, backends()[0].new(t)), start(t, Config{}, backends()[1].new(t))
	nan := float32(math.NaN())
	tests := []struct {
		name  string
		e     *Engine
		p     sample.Params
		err   error // nil: accepted
		field string
		msg   string
	}{
		{"penalties and bias", llama, sample.Params{PresencePenalty: 2, FrequencyPenalty: -2, LogitBias: map[uint32]float32{299: 100, 0: -100}}, nil, "", ""},
		{"presence on the sim", sim, sample.Params{PresencePenalty: 0.5}, ErrNeedsLogits, "sampling.presence_penalty", "logits: sampling.presence_penalty"},
		{"frequency on the sim", sim, sample.Params{FrequencyPenalty: 0.5}, ErrNeedsLogits, "sampling.frequency_penalty", ""},
		{"bias on the sim", sim, sample.Params{LogitBias: map[uint32]float32{1: 1}}, ErrNeedsLogits, "sampling.logit_bias", ""},
		{"format on the sim", sim, sample.Params{Format: sample.Format{JSONObject: true}}, ErrNeedsLogits, "sampling.constraint", ""},
		{"logprobs and bias on the sim", sim, sample.Params{Logprobs: true, LogitBias: map[uint32]float32{1: 1}}, ErrNoLogprobs, "sampling.logprobs", ""},
		{"bias id out of vocabulary", llama, sample.Params{LogitBias: map[uint32]float32{5: 1, 301: 1, 300: 2}}, ErrTokenOutOfRange, "sampling.logit_bias", "logit_bias token 300, vocabulary has 300"},
		{"presence NaN", llama, sample.Params{PresencePenalty: nan}, ErrInvalidSampling, "sampling", "presence_penalty NaN"},
		{"frequency too large", llama, sample.Params{FrequencyPenalty: 3}, ErrInvalidSampling, "sampling", "frequency_penalty 3"},
		{"bias -Inf", llama, sample.Params{LogitBias: map[uint32]float32{4: float32(math.Inf(-1))}}, ErrInvalidSampling, "sampling", "logit_bias -Inf for token 4"},
		{"json object", llama, sample.Params{Format: sample.Format{JSONObject: true}}, nil, "", ""},
		{"json schema", llama, sample.Params{Format: sample.Format{JSONSchema: `{"type":"object"}`}}, nil, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := Request{ID: "v", Prompt: prompt(5, 1), Sampling: tc.p, Stop: StopParams{MaxTokens: 3}}
			for _, err := range []error{tc.e.Validate(r), func() error { _, err := tc.e.Submit(t.Context(), r); return err }()} {
				switch {
				case tc.err == nil && err != nil:
					t.Fatalf("refused: %v", err)
				case tc.err == nil:
				case !errors.Is(err, tc.err) || !errors.Is(err, ErrInvalidRequest):
					t.Fatalf("err %v, want %v", err, tc.err)
				case InvalidField(err) != tc.field || !strings.Contains(err.Error(), tc.msg):
					t.Fatalf("err %v names field %q, want %q and %q", err, InvalidField(err), tc.field, tc.msg)
				}
			}
		})
	}
}
