package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/sample"
)

// The sampling fields, formats, n and echo through the official SDK, on
// the real engine, whole and streamed.

func engineClient(url string) openai.Client {
	return openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
}

// chatBoth runs p whole and streamed and returns each choice's content,
// checking that both ways agree.
func chatBoth(t *testing.T, c openai.Client, p openai.ChatCompletionNewParams, opts ...option.RequestOption) []string {
	t.Helper()
	got, err := c.Chat.Completions.New(t.Context(), p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	stream := c.Chat.Completions.NewStreaming(t.Context(), p, opts...)
	streamed := map[int64]*strings.Builder{}
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			if streamed[ch.Index] == nil {
				streamed[ch.Index] = &strings.Builder{}
			}
			streamed[ch.Index].WriteString(ch.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(got.Choices))
	for i, ch := range got.Choices {
		if ch.Index != int64(i) {
			t.Fatalf("choice %d has index %d", i, ch.Index)
		}
		out[i] = ch.Message.Content
		if s := streamed[int64(i)]; s == nil || s.String() != out[i] {
			t.Fatalf("choice %d: whole %q, streamed %v", i, out[i], s)
		}
	}
	if len(streamed) != len(out) {
		t.Fatalf("%d choices whole, %d streamed", len(out), len(streamed))
	}
	return out
}

// completeBoth is chatBoth for completions.
func completeBoth(t *testing.T, c openai.Client, p openai.CompletionNewParams, opts ...option.RequestOption) []string {
	t.Helper()
	got, err := c.Completions.New(t.Context(), p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	stream := c.Completions.NewStreaming(t.Context(), p, opts...)
	streamed := map[int64]*strings.Builder{}
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			if streamed[ch.Index] == nil {
				streamed[ch.Index] = &strings.Builder{}
			}
			streamed[ch.Index].WriteString(ch.Text)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(got.Choices))
	for i, ch := range got.Choices {
		out[i] = ch.Text
		if s := streamed[int64(i)]; ch.Index != int64(i) || s == nil || s.String() != out[i] {
			t.Fatalf("choice %d (index %d): whole %q, streamed %v", i, ch.Index, out[i], s)
		}
	}
	return out
}

func chatParams(maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: engineModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story.")},
		MaxTokens: openai.Int(maxTokens), Temperature: openai.Float(0)}
}

func completionParams(maxTokens int64) openai.CompletionNewParams {
	return openai.CompletionNewParams{Model: engineModel, Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(maxTokens), Temperature: openai.Float(0)}
}

// tokenID is the engine's byte-tokenizer id of b, as logit_bias keys it.
func tokenID(b byte) string { return strconv.Itoa(int(b) + 3) }

// Greedy output without the new fields is the engine's own greedy
// output, byte for byte.
func TestEngineGreedyUnchanged(t *testing.T) {
	t.Parallel()
	url, w := newEngineStack(t, false)
	c := engineClient(url)
	got := completeBoth(t, c, completionParams(40))
	tok := w.eng.Tokenizer()
	st, err := w.eng.Submit(t.Context(), engine.Request{Prompt: tok.Encode("Once upon a time", true, false),
		Sampling: sample.Params{TopP: 1}, Stop: engine.StopParams{MaxTokens: 40}})
	if err != nil {
		t.Fatal(err)
	}
	var direct bytes.Buffer
	for {
		o, err := st.Recv(t.Context())
		if err != nil {
			break
		}
		direct.WriteString(o.Text)
	}
	if got[0] != direct.String() {
		t.Fatalf("through the frontend %q, the engine alone %q", got[0], direct.String())
	}
}

// A bias of +100 makes greedy output that token; -100 bans it.
func TestEngineLogitBias(t *testing.T) {
	t.Parallel()
	url, _ := newEngineStack(t, false)
	c := engineClient(url)
	p := chatParams(8)
	p.LogitBias = map[string]int64{tokenID('a'): 100}
	if got := chatBoth(t, c, p); got[0] != "aaaaaaaa" {
		t.Fatalf("chat with a +100 bias on a: %q", got[0])
	}
	cp := completionParams(8)
	cp.LogitBias = map[string]int64{tokenID('z'): 100}
	if got := completeBoth(t, c, cp); got[0] != "zzzzzzzz" {
		t.Fatalf("completion with a +100 bias on z: %q", got[0])
	}
	plain := completeBoth(t, c, completionParams(8))[0]
	if plain == "" {
		t.Skip("greedy output starts with a token that decodes to nothing")
	}
	cp.LogitBias = map[string]int64{tokenID(plain[0]): -100}
	if got := completeBoth(t, c, cp); strings.HasPrefix(got[0], plain[:1]) {
		t.Fatalf("banned %q, got %q", plain[:1], got[0])
	}
	p.LogitBias = map[string]int64{"512": 1}
	_, err := c.Chat.Completions.New(t.Context(), p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "logit_bias" || !strings.Contains(apiErr.Message, "vocabulary size 512") {
		t.Fatalf("id 512: %v", err)
	}
}

// Two tokens biased alike: greedy repeats the likelier one, until a
// frequency penalty makes each repetition cost more than the difference.
func TestEnginePenalties(t *testing.T) {
	t.Parallel()
	url, _ := newEngineStack(t, false)
	c := engineClient(url)
	p := chatParams(24)
	p.LogitBias = map[string]int64{tokenID('a'): 100, tokenID('b'): 100}
	plain := chatBoth(t, c, p)[0]
	if plain != strings.Repeat(plain[:1], 24) {
		t.Fatalf("without penalties: %q", plain)
	}
	p.FrequencyPenalty = openai.Float(2)
	if got := chatBoth(t, c, p)[0]; !strings.Contains(got, "a") || !strings.Contains(got, "b") {
		t.Fatalf("frequency_penalty 2: %q", got)
	}
	p.FrequencyPenalty = openai.Float(0)
	p.PresencePenalty = openai.Float(-2) // a negative penalty favours what is there
	if got := chatBoth(t, c, p)[0]; got != plain {
		t.Fatalf("presence_penalty -2: %q, want %q", got, plain)
	}
	cp := completionParams(24)
	cp.LogitBias = p.LogitBias
	cp.FrequencyPenalty = openai.Float(2)
	if got := completeBoth(t, c, cp)[0]; !strings.Contains(got, "a") || !strings.Contains(got, "b") {
		t.Fatalf("completion, frequency_penalty 2: %q", got)
	}
}

// response_format holds even a random model sampled at temperature 1 to
// JSON: any object, or a value valid against the schema.
func TestEngineResponseFormat(t *testing.T) {
	t.Parallel()
	url, _ := newEngineStack(t, false)
	c := engineClient(url)
	p := chatParams(80)
	p.Temperature, p.Seed = openai.Float(1), openai.Int(3)
	p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	for _, got := range chatBoth(t, c, p) {
		var obj map[string]any
		if err := json.Unmarshal([]byte(got), &obj); err != nil {
			t.Fatalf("json_object: %q: %v", got, err)
		}
	}
	schema := map[string]any{"type": "object", "additionalProperties": false, "required": []string{"name", "age"}, "properties": map[string]any{
		"name": map[string]any{"type": "string", "maxLength": 8},
		"age":  map[string]any{"type": "integer", "minimum": 0, "maximum": 120},
	}}
	p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "person", Schema: schema, Strict: openai.Bool(true)}}}
	p.N = openai.Int(2)
	for _, got := range chatBoth(t, c, p) {
		checkPerson(t, got)
	}
	cp := completionParams(80)
	cp.Temperature, cp.Seed = openai.Float(1), openai.Int(4)
	rf := option.WithJSONSet("response_format", map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "person", "schema": schema}})
	for _, got := range completeBoth(t, c, cp, rf) {
		checkPerson(t, got)
	}

	schema["properties"].(map[string]any)["name"] = map[string]any{"type": "string", "pattern": "^[A-Z]"}
	_, err := c.Chat.Completions.New(t.Context(), p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "response_format.json_schema.schema" ||
		!strings.Contains(apiErr.Message, `#/properties/name (keyword "pattern")`) {
		t.Fatalf("pattern: %v", err)
	}
}

func checkPerson(t *testing.T, got string) {
	t.Helper()
	var person struct {
		Name *string `json:"name"`
		Age  *int    `json:"age"`
	}
	dec := json.NewDecoder(strings.NewReader(got))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&person); err != nil || person.Name == nil || person.Age == nil ||
		len([]rune(*person.Name)) > 8 || *person.Age < 0 || *person.Age > 120 || dec.More() {
		t.Fatalf("json_schema: %q (err %v)", got, err)
	}
}

// n choices: choice i of a request seeded s is the one choice of the same
// request seeded s+i, so each is reproducible; greedy choices are alike.
// (The real model: the random one samples nearly greedily.)
func TestEngineChoices(t *testing.T) {
	t.Parallel()
	url, _ := newEngineStack(t, true)
	c := engineClient(url)
	p := chatParams(16)
	p.Temperature, p.Seed, p.N = openai.Float(1), openai.Int(7), openai.Int(3)
	three := chatBoth(t, c, p)
	if len(three) != 3 || three[0] == three[1] && three[1] == three[2] {
		t.Fatalf("seeded choices %q", three)
	}
	for i, want := range three {
		one := p
		one.N, one.Seed = openai.Int(1), openai.Int(7+int64(i))
		if got := chatBoth(t, c, one)[0]; got != want {
			t.Fatalf("choice %d: %q; alone with seed %d: %q", i, want, 7+i, got)
		}
	}
	got, err := c.Chat.Completions.New(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	var completion int64
	for i, ch := range got.Choices {
		if ch.Message.Content != three[i] {
			t.Fatalf("again, choice %d: %q, first %q", i, ch.Message.Content, three[i])
		}
		completion += 16
		if ch.FinishReason == "stop" {
			completion = -1 // an early end: the count is the worker's
		}
	}
	if got.Usage.PromptTokens == 0 || got.Usage.TotalTokens != got.Usage.PromptTokens+got.Usage.CompletionTokens ||
		completion >= 0 && got.Usage.CompletionTokens != completion {
		t.Fatalf("usage %+v", got.Usage)
	}

	greedy := chatParams(16)
	greedy.N = openai.Int(3)
	if g := chatBoth(t, c, greedy); g[0] != g[1] || g[1] != g[2] {
		t.Fatalf("greedy choices differ: %q", g)
	}
	cp := completionParams(16)
	cp.N, cp.Seed, cp.Temperature = openai.Int(2), openai.Int(9), openai.Float(1)
	if g := completeBoth(t, c, cp); len(g) != 2 || g[0] == g[1] {
		t.Fatalf("completions n=2: %q", g)
	}
}

// echo prepends the prompt, whole and streamed.
func TestEngineEcho(t *testing.T) {
	t.Parallel()
	url, _ := newEngineStack(t, false)
	c := engineClient(url)
	plain := completeBoth(t, c, completionParams(10))[0]
	p := completionParams(10)
	p.Echo = openai.Bool(true)
	if got := completeBoth(t, c, p)[0]; got != "Once upon a time"+plain {
		t.Fatalf("echo: %q, want the prompt then %q", got, plain)
	}
	p.Logprobs = openai.Int(1)
	_, err := c.Completions.New(context.Background(), p)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "echo" {
		t.Fatalf("echo with logprobs: %v", err)
	}
}
