package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"switchyard.dev/libs/engine/constrain"
	"switchyard.dev/libs/engine/sample"
	"switchyard.dev/libs/engine/tokenizer"
)

// formatSchemas are the schemas the structured-output tests generate
// with: a nested object with required properties, an enum, an array with
// minItems and maxItems, integer bounds and a bounded string.
var formatSchemas = []string{
	`{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":120},` +
		`"pet":{"type":"object","properties":{"kind":{"enum":["cat","dog","bird"]},"legs":{"type":"integer","minimum":2,"maximum":4}},"required":["kind"]}},` +
		`"required":["name","pet"],"additionalProperties":false}`,
	`{"enum":["red","green","blue",42,null,{"k":[true]}]}`,
	`{"type":"array","items":{"type":"string","minLength":1,"maxLength":8},"minItems":2,"maxItems":4}`,
	`{"type":"object","properties":{"n":{"type":"integer","exclusiveMinimum":-50,"maximum":999},"ok":{"type":"boolean"},` +
		`"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3}},"required":["n","ok","tags"]}`,
}

// referenceSchema compiles schema with the reference validator.
func referenceSchema(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource("mem:///schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem:///schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkValue reports whether text is one JSON value (an object when s is
// nil: json_object) valid against s.
func checkValue(s *jsonschema.Schema, text string) error {
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if s == nil {
		if _, ok := v.(map[string]any); !ok {
			return errors.New("not an object")
		}
		return nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(text)))
	if err != nil {
		return err
	}
	return s.Validate(inst)
}

// minTokens is the MinTokens of f's grammar over e's vocabulary.
func minTokens(t testing.TB, e *Engine, f sample.Format) int {
	t.Helper()
	g, err := e.grammarFor(&Request{Sampling: sample.Params{Format: f}})
	if err != nil || g == nil {
		t.Fatalf("format %+v: grammar %v, err %v", f, g, err)
	}
	return g.MinTokens(e.formats.vocab)
}

// TestFormatGenerations: 200 generations of stories260K at temperature 1
// (seeds 1..200, 50 at a time), held to json_object or one of four
// schemas with a budget of MinTokens plus a margin, all end with
// FinishStop in a value that parses and that the reference validator
// accepts; no control token is emitted.
func TestFormatGenerations(t *testing.T) {
	t.Parallel()
	e := start(t, Config{}, stories(t))
	formats := []sample.Format{{JSONObject: true}}
	refs := []*jsonschema.Schema{nil}
	for _, s := range formatSchemas {
		formats = append(formats, sample.Format{JSONSchema: s})
		refs = append(refs, referenceSchema(t, s))
	}
	prompts := []string{"Once upon a time", "The cat said", "Lily and Tom"}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 50)
	for i := range 200 {
		k := i % len(formats)
		r := Request{ID: fmt.Sprint("gen-", i+1), Prompt: e.Tokenizer().Encode(prompts[i%len(prompts)], true, false),
			Sampling: sample.Params{Temperature: 1, Seed: seed(uint64(i + 1)), Format: formats[k]},
			Stop:     StopParams{MaxTokens: minTokens(t, e, formats[k]) + 64}}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			got := run(t, e, r)
			if got.final.Finish != FinishStop {
				t.Errorf("%s: finish %q (err %v) after %d tokens: %q", r.ID, got.final.Finish, got.final.Err, len(got.tokens), got.text)
				return
			}
			if err := checkValue(refs[k], got.text); err != nil {
				t.Errorf("%s (format %d): %q: %v", r.ID, k, got.text, err)
			}
			for _, tok := range got.tokens {
				if tok < tokenizer.ByteOffset {
					t.Errorf("%s: control token %d emitted: %v", r.ID, tok, got.tokens)
				}
			}
		})
	}
	wg.Wait()
}

// TestFormatEndsValue: a constrained request ends with FinishStop once its
// value is complete: at the EOS the grammar then allows, even with
// ignore_eos, or, when steering completed it on the last token the budget
// allows (stories260K dawdles in whitespace), at that token. A budget below
// MinTokens is accepted and cut short with FinishLength.
func TestFormatEndsValue(t *testing.T) {
	t.Parallel()
	e := start(t, Config{}, stories(t))
	enum := sample.Format{JSONSchema: formatSchemas[1]}
	for _, ignore := range []bool{false, true} {
		r := run(t, e, Request{Prompt: storiesPrompt(e), Sampling: sample.Params{Format: enum}, Stop: StopParams{MaxTokens: 40, IgnoreEOS: ignore}})
		if r.final.Finish != FinishStop || checkValue(referenceSchema(t, formatSchemas[1]), r.text) != nil || r.final.Usage.CompletionTokens != len(r.tokens)+1 {
			t.Errorf("enum, ignore_eos %v: finish %q (err %v), %d tokens (usage %+v): %q", ignore, r.final.Finish, r.final.Err, len(r.tokens), r.final.Usage, r.text)
		}
	}
	f := sample.Format{JSONSchema: formatSchemas[0]}
	need := minTokens(t, e, f)
	r := run(t, e, Request{Prompt: storiesPrompt(e), Sampling: sample.Params{Format: f}, Stop: StopParams{MaxTokens: need + 50}})
	if r.final.Finish != FinishStop || checkValue(referenceSchema(t, formatSchemas[0]), r.text) != nil {
		t.Errorf("object: finish %q (err %v), %d tokens: %q", r.final.Finish, r.final.Err, len(r.tokens), r.text)
	}
	short := run(t, e, Request{Prompt: storiesPrompt(e), Sampling: sample.Params{Format: f}, Stop: StopParams{MaxTokens: need / 2}})
	if short.final.Finish != FinishLength || len(short.tokens) != need/2 || json.Valid([]byte(short.text)) {
		t.Errorf("max_tokens %d below MinTokens %d: finish %q (err %v), %d tokens: %q", need/2, need, short.final.Finish, short.final.Err, len(short.tokens), short.text)
	}
}

// TestFormatExact: a constrained seeded request at temperature 1 gives the
// same tokens alone, with chunked prefill, on a prefix-cache hit, batched
// among others, and from a given first token; and a free-text greedy
// request gives the same tokens on an engine that serves formats as on one
// that never did (a zero Format takes the unconstrained path).
func TestFormatExact(t *testing.T) {
	t.Parallel()
	p := start(t, Config{}, stories(t)).Tokenizer().Encode(strings.Repeat("Once upon a time there was a cat. ", 4), true, false)
	if len(p) < 33 {
		t.Fatalf("prompt of %d tokens: want 2 full blocks and more, for a prefix hit", len(p))
	}
	for _, f := range []sample.Format{{JSONObject: true}, {JSONSchema: formatSchemas[3]}} {
		req := Request{Prompt: p, Sampling: sample.Params{Temperature: 1, Seed: seed(7), Format: f}, Stop: StopParams{MaxTokens: 120}}
		ref := run(t, start(t, Config{}, stories(t)), req)
		if ref.final.Finish != FinishStop {
			t.Fatalf("format %+v: reference finished %q (err %v): %q", f, ref.final.Finish, ref.final.Err, ref.text)
		}
		check := func(name string, got result) {
			t.Helper()
			if !sameTokens(got.tokens, ref.tokens) || got.final.Finish != FinishStop {
				t.Errorf("format %+v, %s: %q (%s), alone %q", f, name, got.text, got.final.Finish, ref.text)
			}
		}
		check("chunked", run(t, start(t, Config{MaxBatchTokens: 7}, stories(t)), req))
		e := start(t, Config{}, stories(t))
		run(t, e, Request{Prompt: p[:len(p)-1], Stop: StopParams{MaxTokens: 1}})
		hit := run(t, e, req)
		check("prefix hit", hit)
		if hit.final.Usage.CachedPromptTokens == 0 {
			t.Errorf("format %+v: no prefix hit", f)
		}
		check("batched", batchOf16(t, start(t, Config{MaxBatchTokens: 64}, stories(t)), req))
		first := req
		first.FirstToken = &ref.tokens[0]
		check("first token given", run(t, e, first))
	}

	free := Request{Prompt: p, Stop: StopParams{MaxTokens: 40, IgnoreEOS: true}}
	want := run(t, start(t, Config{}, stories(t)), free)
	e := start(t, Config{}, stories(t))
	run(t, e, Request{Prompt: p, Sampling: sample.Params{Format: sample.Format{JSONObject: true}}, Stop: StopParams{MaxTokens: 40}})
	if got := run(t, e, free); !sameTokens(got.tokens, want.tokens) || got.text != want.text {
		t.Errorf("free text after a format: %q, want %q", got.text, want.text)
	}
}

// TestFormatBudget: a request's FormatBudget replaces its own budget in
// the mask, so a one-token request (a disaggregated prefill) draws the
// first token of the longer request it stands for; without it, the tight
// budget of one token steers the draw elsewhere.
func TestFormatBudget(t *testing.T) {
	t.Parallel()
	e := start(t, Config{}, stories(t))
	// An integer or a long string: with one token left only a digit fits.
	f := sample.Format{JSONSchema: `{"anyOf":[{"type":"integer"},{"type":"string","minLength":20}]}`}
	differs := 0
	for s := range uint64(20) {
		full := Request{Prompt: storiesPrompt(e), Sampling: sample.Params{Temperature: 1, Seed: seed(s), Format: f}, Stop: StopParams{MaxTokens: 80}}
		want := run(t, e, full)
		one := full
		one.Stop = StopParams{MaxTokens: 1, IgnoreEOS: true}
		one.FormatBudget = e.OutputBudget(full)
		if got := run(t, e, one); len(got.tokens) != 1 || got.tokens[0] != want.tokens[0] {
			t.Errorf("seed %d: one token with the full budget %v, the full request's first %d", s, got.tokens, want.tokens[0])
		}
		one.FormatBudget = 0
		if got := run(t, e, one); len(got.tokens) == 1 && got.tokens[0] != want.tokens[0] {
			differs++
		}
	}
	if differs == 0 {
		t.Error("the budget never changed the first token: the test shows nothing")
	}
	if b := e.OutputBudget(Request{Prompt: make([]uint32, e.maxLen-3), Stop: StopParams{MaxTokens: 100}}); b != 3 {
		t.Errorf("OutputBudget near the end of the context = %d, want 3", b)
	}
}

// TestFormatErrors: a schema the compiler refuses is an invalid request
// on field sampling.constraint, from Validate and Submit alike, whose
// message names the keyword, the JSON pointer of its subschema and, for a
// limit, the limit.
func TestFormatErrors(t *testing.T) {
	t.Parallel()
	e := start(t, Config{}, backends()[0].new(t))
	props := make([]string, constrain.MaxProperties+1)
	for i := range props {
		props[i] = fmt.Sprintf(`"p%d":{}`, i)
	}
	for _, tc := range []struct{ name, schema, msg string }{
		{"unsupported keyword", `{"type":"object","properties":{"city":{"type":"string","pattern":"^[A-Z]"}}}`, `json_schema keyword "pattern" at #/properties/city: keyword not supported`},
		{"oneOf", `{"oneOf":[{"type":"string"},{"type":"integer"}]}`, `keyword "oneOf" at #`},
		{"not JSON", `{"type":`, `json_schema at #: not valid JSON: `},
		{"bad type", `{"type":"strin"}`, `keyword "type" at #: unknown type "strin"`},
		{"too many properties", `{"properties":{` + strings.Join(props, ",") + `}}`, fmt.Sprintf(`keyword "properties" at #: %d properties, over MaxProperties (%d)`, len(props), constrain.MaxProperties)},
		{"too long", `{"description":"` + strings.Repeat("x", constrain.MaxSchemaBytes) + `"}`, fmt.Sprintf(`keyword "limit" at #: schema is %d bytes, over MaxSchemaBytes (%d)`, constrain.MaxSchemaBytes+18, constrain.MaxSchemaBytes)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := Request{ID: "s", Prompt: prompt(5, 1), Sampling: sample.Params{Format: sample.Format{JSONSchema: tc.schema}}, Stop: StopParams{MaxTokens: 8}}
			_, serr := e.Submit(t.Context(), r)
			for _, err := range []error{e.Validate(r), serr} {
				if !errors.Is(err, ErrInvalidConstraint) || !errors.Is(err, ErrInvalidRequest) || InvalidField(err) != "sampling.constraint" || !strings.Contains(err.Error(), tc.msg) {
					t.Fatalf("err %v (field %q), want ErrInvalidConstraint on sampling.constraint saying %q", err, InvalidField(err), tc.msg)
				}
			}
		})
	}
}

// TestFormatVocab: the engine's vocabulary gives control and stop tokens
// no piece, byte fallbacks their raw byte, and pieces their leading space;
// only EOS ends a value.
func TestFormatVocab(t *testing.T) {
	t.Parallel()
	e := start(t, Config{}, stories(t))
	e.formats.init(e.tok, e.model)
	v := e.formats.vocab
	if v.Size() != e.model.VocabSize {
		t.Fatalf("vocab size %d, model %d", v.Size(), e.model.VocabSize)
	}
	for id := range tokenizer.ByteOffset {
		if len(v.Piece(id)) != 0 {
			t.Errorf("control token %d has piece %q", id, v.Piece(id))
		}
	}
	for _, id := range e.model.StopTokens {
		if len(v.Piece(id)) != 0 || v.IsEOS(id) != (id == e.model.EOS) {
			t.Errorf("stop token %d: piece %q, ends a value %v", id, v.Piece(id), v.IsEOS(id))
		}
	}
	if p := v.Piece(tokenizer.ByteOffset + '{'); string(p) != "{" {
		t.Errorf("byte fallback of '{' emits %q", p)
	}
	spaced := e.Tokenizer().Encode("a time", false, false)
	if p := v.Piece(spaced[len(spaced)-1]); string(p) != " time" {
		t.Errorf("token of \" time\" emits %q", p)
	}
}

// TestFormatPreempted: constrained seeded requests through a KV pool too
// small for all of them are preempted and recomputed, with the tokens
// each gives alone (the matcher advances only on emitted tokens).
func TestFormatPreempted(t *testing.T) {
	t.Parallel()
	free := start(t, Config{}, stories(t))
	tight := start(t, Config{NumBlocks: 16, MaxBatchTokens: 64}, stories(t))
	p := free.Tokenizer().Encode(strings.Repeat("Once upon a time there was a cat. ", 3), true, false)
	var reqs []Request
	var want []result
	for i := range 6 {
		r := Request{Prompt: p, Sampling: sample.Params{Temperature: 1, Seed: seed(uint64(100 + i)), Format: sample.Format{JSONSchema: formatSchemas[i%2*3]}},
			Stop: StopParams{MaxTokens: 120}}
		reqs = append(reqs, r)
		want = append(want, run(t, free, r))
	}
	var wg sync.WaitGroup
	got := make([]result, len(reqs))
	for i, r := range reqs {
		st, err := tight.Submit(t.Context(), r)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { got[i] = collect(t, st) })
	}
	wg.Wait()
	for i := range reqs {
		if !sameTokens(got[i].tokens, want[i].tokens) || got[i].final.Finish != want[i].final.Finish {
			t.Errorf("request %d: %q (%s, err %v), alone %q (%s)", i, got[i].text, got[i].final.Finish, got[i].final.Err, want[i].text, want[i].final.Finish)
		}
	}
	if tight.Metrics().Preemptions == 0 {
		t.Error("no preemption: the test shows nothing")
	}
}
