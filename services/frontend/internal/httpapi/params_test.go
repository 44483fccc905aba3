package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/protobuf/proto"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/openai"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

// The sampling fields and the format reach the worker as it takes them.
func TestParamsReachWorker(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	fields := `"max_tokens":4,"presence_penalty":0.5,"frequency_penalty":-1.5,"logit_bias":{"72":100,"0":-100},"response_format":{"type":"json_object"}`
	for _, path := range []string{"/v1/chat/completions", "/v1/completions"} {
		body := chatBody(fields)
		if path == "/v1/completions" {
			body = `{"model":"tiny","prompt":"Hi",` + fields + `}`
		}
		if resp := s.post(t, path, body); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
	}
	want := &commonv1.SamplingParams{Temperature: 1, TopP: 1, PresencePenalty: 0.5, FrequencyPenalty: -1.5,
		LogitBias:  map[uint32]float32{72: 100, 0: -100},
		Constraint: &commonv1.OutputConstraint{Kind: &commonv1.OutputConstraint_JsonObject{JsonObject: &commonv1.JsonObject{}}}}
	for _, r := range s.Workers[0].Requests() {
		if !proto.Equal(r.GetSampling(), want) {
			t.Fatalf("worker got sampling %v, want %v", r.GetSampling(), want)
		}
	}
	schema := `{"type":"object","properties":{"a":{"type":"integer"}}}`
	s.post(t, "/v1/completions", `{"model":"tiny","prompt":"Hi","max_tokens":2,"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":`+schema+`}}}`)
	reqs := s.Workers[0].Requests()
	if got := reqs[len(reqs)-1].GetSampling().GetConstraint().GetJsonSchema(); got != schema {
		t.Fatalf("json_schema constraint %q", got)
	}
}

// A request without the new fields is what it was: the same sampling on
// the wire and the same bytes out, n=1 or not said.
func TestGreedyUnchangedWithoutNewFields(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	for _, extra := range []string{`"temperature":0,"max_tokens":30`, `"temperature":0,"max_tokens":30,"n":1,"response_format":{"type":"text"},"logit_bias":{}`} {
		var got openai.ChatCompletion
		decode(t, s.post(t, "/v1/chat/completions", chatBody(extra)), &got)
		if len(got.Choices) != 1 || got.Choices[0].Message.Content != want(chatPromptLen, 30) || got.Choices[0].Index != 0 {
			t.Fatalf("%s: got %+v", extra, got)
		}
	}
	for _, r := range s.Workers[0].Requests() {
		if want := (&commonv1.SamplingParams{TopP: 1}); !proto.Equal(r.GetSampling(), want) {
			t.Fatalf("worker got sampling %v, want %v", r.GetSampling(), want)
		}
	}
}

func TestLogitBiasVocabulary(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	resp := s.post(t, "/v1/completions", `{"model":"tiny","prompt":"Hi","logit_bias":{"299":1,"300":1,"5000":1}}`)
	var body openai.ErrorBody
	decode(t, resp, &body)
	const msg = "logit_bias names token id 300, which is not below the vocabulary size 300."
	if resp.StatusCode != http.StatusBadRequest || body.Error.Param == nil || *body.Error.Param != "logit_bias" || body.Error.Message != msg {
		t.Fatalf("got %d %+v", resp.StatusCode, body.Error)
	}
	if len(s.Workers[0].Requests()) != 0 {
		t.Fatal("the worker was asked")
	}
}

// A worker's refusal of a sampling field names the parameter behind it;
// a refused constraint names the field the format came from.
func TestWorkerFieldErrorsNameParams(t *testing.T) {
	t.Parallel()
	tests := []struct{ field, extra, param string }{
		{"sampling.presence_penalty", `"presence_penalty":1`, "presence_penalty"},
		{"sampling.frequency_penalty", `"frequency_penalty":1`, "frequency_penalty"},
		{"sampling.logit_bias", `"logit_bias":{"5":1}`, "logit_bias"},
		{"sampling.constraint", `"response_format":{"type":"json_object"}`, "response_format"},
	}
	for _, tc := range tests {
		t.Run(tc.field, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "sim", GenerateErr: fieldViolation(tc.field)}}})
			for _, stream := range []string{"false", "true"} {
				checkError(t, s.post(t, "/v1/chat/completions", chatBody(tc.extra+`,"stream":`+stream)),
					errCase{status: http.StatusBadRequest, typ: openai.TypeInvalidRequest, param: tc.param})
			}
		})
	}
	ce := fieldViolation("sampling.constraint")
	if e := genError(ce, openai.Generation{Format: openai.Format{JSONObject: true, Param: "tool_choice"}}); e.Param != "tool_choice" {
		t.Fatalf("forced call: param %q", e.Param)
	}
	if e := genError(ce, openai.Generation{}); e.Param != "response_format" {
		t.Fatalf("no format param: %q", e.Param)
	}
}

// fieldViolation is InvalidArgument naming field, as a sim worker refuses
// what needs logits.
func fieldViolation(field string) *connect.Error {
	err := fmt.Errorf("%s needs an executor that computes logits", field)
	ce := connect.NewError(connect.CodeInvalidArgument, err)
	d, _ := connect.NewErrorDetail(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: err.Error()}}})
	ce.AddDetail(d)
	return ce
}

// n choices: each numbered, seeded seed+i, all on the worker of the
// first, usage counting the prompt once.
func TestChoices(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w1"}, {ID: "w2"}}})
	var chat openai.ChatCompletion
	decode(t, s.post(t, "/v1/chat/completions", chatBody(`"n":3,"seed":7,"max_tokens":12`)), &chat)
	if len(chat.Choices) != 3 || chat.Usage.PromptTokens != chatPromptLen || chat.Usage.CompletionTokens != 36 || chat.Usage.TotalTokens != chatPromptLen+36 {
		t.Fatalf("got %+v usage %+v", chat.Choices, chat.Usage)
	}
	for i, c := range chat.Choices {
		if c.Index != i || c.Message.Content != want(chatPromptLen, 12) || c.FinishReason != "length" {
			t.Fatalf("choice %d: %+v", i, c)
		}
	}
	w1, w2 := s.Workers[0].Requests(), s.Workers[1].Requests()
	if len(w1) != 3 || len(w2) != 0 {
		t.Fatalf("w1 got %d requests, w2 %d: want all three on the first choice's worker", len(w1), len(w2))
	}
	var seeds []uint64
	ids := map[string]bool{}
	for _, r := range w1 {
		seeds = append(seeds, r.GetSampling().GetSeed())
		ids[r.GetRequestId()] = true
	}
	slices.Sort(seeds)
	if !slices.Equal(seeds, []uint64{7, 8, 9}) || len(ids) != 3 {
		t.Fatalf("seeds %v, request ids %v", seeds, ids)
	}

	var cmpl openai.Completion
	decode(t, s.post(t, "/v1/completions", `{"model":"tiny","prompt":"Hello","n":2,"best_of":2,"max_tokens":5}`), &cmpl)
	if len(cmpl.Choices) != 2 || cmpl.Choices[1].Index != 1 || cmpl.Choices[1].Text != want(6, 5) || cmpl.Usage.CompletionTokens != 10 || cmpl.Usage.PromptTokens != 6 {
		t.Fatalf("completions: %+v usage %+v", cmpl.Choices, cmpl.Usage)
	}
	for _, r := range s.Workers[0].Requests()[3:] {
		if r.GetSampling().Seed != nil {
			t.Fatalf("unseeded request sent seed %d", r.GetSampling().GetSeed())
		}
	}
}

// A stream of n choices interleaves their chunks, each with its index:
// every choice has its role chunk, its text and its finish chunk, then
// one usage chunk and [DONE].
func TestChoicesStreamed(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w1", TokenDelay: time.Millisecond}}})
	resp := s.post(t, "/v1/chat/completions", chatBody(`"n":3,"max_tokens":10,"stream":true,"stream_options":{"include_usage":true}`))
	evs := events(t, resp.Body)
	if evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("last event %q", evs[len(evs)-1])
	}
	var text [3]strings.Builder
	var roles, finishes [3]int
	var usage *openai.Usage
	for _, e := range evs[:len(evs)-1] {
		var ch openai.ChatChunk
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatal(err)
		}
		if ch.Usage != nil {
			usage = ch.Usage
			continue
		}
		c := ch.Choices[0]
		if c.Delta.Role == "assistant" {
			roles[c.Index]++
		}
		if c.Delta.Content != nil {
			text[c.Index].WriteString(*c.Delta.Content)
		}
		if c.FinishReason != nil {
			finishes[c.Index]++
		}
	}
	for i := range 3 {
		if text[i].String() != want(chatPromptLen, 10) || roles[i] != 1 || finishes[i] != 1 {
			t.Fatalf("choice %d: %q, %d role chunks, %d finish chunks", i, text[i].String(), roles[i], finishes[i])
		}
	}
	if usage == nil || usage.PromptTokens != chatPromptLen || usage.CompletionTokens != 30 {
		t.Fatalf("usage %+v", usage)
	}
}

// failingChoice fails choice 1 of every request after `after` deltas.
type failingChoice struct {
	Generator
	after int
}

var errChoice = connect.NewError(connect.CodeUnavailable, errors.New("worker gone"))

func (f failingChoice) Run(ctx context.Context, req generate.Request, emit func(generate.Delta) error) (generate.Result, error) {
	if !strings.HasSuffix(req.ID, "-1") {
		return f.Generator.Run(ctx, req, emit)
	}
	n := 0
	res, err := f.Generator.Run(ctx, req, func(d generate.Delta) error {
		if n++; n > f.after {
			return errors.New("stop here")
		}
		return emit(d)
	})
	if err != nil {
		err = errChoice
	}
	return res, err
}

// One choice failing fails the request: an error status before the
// response began, an error event ending the stream after.
func TestChoiceFailureFailsRequest(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w1", TokenDelay: 2 * time.Millisecond}},
		wrap: func(g Generator) Generator { return failingChoice{Generator: g, after: 3} }})
	resp := s.post(t, "/v1/chat/completions", chatBody(`"n":2,"max_tokens":40`))
	if resp.StatusCode != http.StatusServiceUnavailable {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	evs := events(t, s.post(t, "/v1/chat/completions", chatBody(`"n":2,"max_tokens":40,"stream":true`)).Body)
	if len(evs) < 2 || evs[len(evs)-1] != "[DONE]" || !strings.Contains(evs[len(evs)-2], `"error"`) {
		t.Fatalf("stream ended with %q", evs[max(len(evs)-2, 0):])
	}
	for _, e := range evs {
		if strings.Contains(e, `"finish_reason":"length"`) {
			t.Fatalf("a choice finished although the request failed: %s", e)
		}
	}
}

// echo puts the prompt before the completion: in the whole text, and as
// a stream's first chunk; a token-id prompt is decoded.
func TestEcho(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	var got openai.Completion
	decode(t, s.post(t, "/v1/completions", `{"model":"tiny","prompt":"Hello","echo":true,"max_tokens":8,"n":2}`), &got)
	for i, c := range got.Choices {
		if c.Text != "Hello"+want(6, 8) || c.Index != i {
			t.Fatalf("choice %d: %+v", i, c)
		}
	}
	if len(got.Choices) != 2 || got.Usage.CompletionTokens != 16 {
		t.Fatalf("got %+v", got)
	}
	decode(t, s.post(t, "/v1/completions", `{"model":"tiny","prompt":[1,72,101],"echo":true,"max_tokens":4}`), &got)
	if got.Choices[0].Text != "Eb"+want(3, 4) { // ids 72 and 101 are the bytes E and b
		t.Fatalf("token prompt: %q", got.Choices[0].Text)
	}
	evs := events(t, s.post(t, "/v1/completions", `{"model":"tiny","prompt":"Hello","echo":true,"max_tokens":8,"stream":true}`).Body)
	var first openai.Completion
	if err := json.Unmarshal([]byte(evs[0]), &first); err != nil || first.Choices[0].Text != "Hello" || first.Choices[0].FinishReason != nil {
		t.Fatalf("first chunk %s", evs[0])
	}
	var rest strings.Builder
	for _, e := range evs[1 : len(evs)-1] {
		var ch openai.Completion
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatal(err)
		}
		rest.WriteString(ch.Choices[0].Text)
	}
	if rest.String() != want(6, 8) {
		t.Fatalf("after the echo: %q", rest.String())
	}
	checkError(t, s.post(t, "/v1/completions", `{"model":"tiny","prompt":"Hello","echo":true,"logprobs":1}`),
		errCase{status: http.StatusBadRequest, typ: openai.TypeInvalidRequest, param: "echo"})
}

// /openapi.json states the new fields.
func TestOpenAPIParams(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	resp, err := http.Get(s.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]map[string]any
				Required   []string
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc.Components.Schemas
	for schema, fields := range map[string][]string{
		"ChatRequest":       {"n", "presence_penalty", "frequency_penalty", "logit_bias", "response_format"},
		"CompletionRequest": {"n", "presence_penalty", "frequency_penalty", "logit_bias", "response_format", "echo", "best_of"},
		"ResponseFormat":    {"type", "json_schema"},
		"JSONSchemaFormat":  {"name", "description", "schema", "strict"},
	} {
		for _, f := range fields {
			if _, ok := schemas[schema].Properties[f]; !ok {
				t.Errorf("%s has no %s", schema, f)
			}
		}
	}
	if bias := schemas["ChatRequest"].Properties["logit_bias"]; bias["type"] != "object" || bias["additionalProperties"].(map[string]any)["type"] != "number" {
		t.Errorf("logit_bias: %v", bias)
	}
	if !slices.Contains(schemas["ResponseFormat"].Required, "type") || !slices.Contains(schemas["JSONSchemaFormat"].Required, "name") {
		t.Errorf("required: %v, %v", schemas["ResponseFormat"].Required, schemas["JSONSchemaFormat"].Required)
	}
}
