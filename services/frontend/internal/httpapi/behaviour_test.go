package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/services/frontend/internal/openai"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

func completionText(t *testing.T, s *stack, body string) (string, string, openai.Usage) {
	t.Helper()
	resp := s.post(t, "/v1/completions", body)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var got openai.Completion
	decode(t, resp, &got)
	return got.Choices[0].Text, *got.Choices[0].FinishReason, *got.Usage
}

func TestStopLists(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", EOSAfter: 40}}})
	// Prompt "Hello" is 6 tokens; output starts at Script[6]: "pon a time, a little fox..."
	tests := []struct {
		name, extra, text, finish string
	}{
		{"string", `"stop":"time"`, "pon a ", "stop"},
		{"list earliest wins", `"stop":["fox","a "]`, "pon ", "stop"},
		{"no match", `"stop":["zebra"],"max_tokens":10`, want(6, 10), "length"},
		{"eos", ``, want(6, 40), "stop"},
		{"ignore_eos", `"ignore_eos":true,"max_tokens":45`, want(6, 45), "length"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := `{"model":"tiny","prompt":"Hello"`
			if tc.extra != "" {
				body += "," + tc.extra
			}
			text, finish, _ := completionText(t, s, body+"}")
			if text != tc.text || finish != tc.finish {
				t.Fatalf("got %q %q, want %q %q", text, finish, tc.text, tc.finish)
			}
		})
	}
}

func TestDefaultMaxTokensFillsContext(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", Context: 32}}})
	_, finish, u := completionText(t, s, `{"model":"tiny","prompt":"Hello"}`)
	if finish != "length" || u.CompletionTokens != 32-6 {
		t.Fatalf("finish %q usage %+v", finish, u)
	}
	if got := s.Workers[0].Requests()[0].GetStop().GetMaxTokens(); got != 26 {
		t.Fatalf("worker max_tokens %d", got)
	}
}

func TestHintsReachRouterAndWorker(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "a"}, {ID: "b"}}})
	completionText(t, s, `{"model":"tiny","prompt":"x","max_tokens":2,"seed":7,"temperature":0,"top_k":5,"switchyard":{"priority":5,"session_id":"s1","worker_id":"b","expected_output_tokens":9}}`)
	h := s.Router.Routes()[0].GetHints()
	if h.GetPriority() != 5 || h.GetSessionId() != "s1" || h.GetWorkerId() != "b" || h.GetExpectedOutputTokens() != 9 {
		t.Fatalf("route hints %+v", h)
	}
	reqs := s.Workers[1].Requests()
	if len(reqs) != 1 || reqs[0].GetHints().GetPriority() != 5 || reqs[0].GetSampling().GetSeed() != 7 || reqs[0].GetSampling().GetTopK() != 5 {
		t.Fatalf("worker b requests %+v", reqs)
	}
	if rel := s.releases(t); len(rel) != 1 || !strings.HasPrefix(rel[0], "cmpl-") {
		t.Fatalf("releases %v", rel)
	}
}

func TestMigrationIsInvisible(t *testing.T) {
	t.Parallel()
	calm := newStack(t, stackConfig{})
	undisturbed, _, _ := completionText(t, calm, `{"model":"tiny","prompt":"Hello","max_tokens":70}`)
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "a", DieAfter: 23, Abort: true}, {ID: "b", DieAfter: 30}, {ID: "c"}}})
	resp := s.post(t, "/v1/completions", `{"model":"tiny","prompt":"Hello","max_tokens":70,"stream":true,"stream_options":{"include_usage":true}}`)
	var text strings.Builder
	var u *openai.Usage
	for _, e := range events(t, resp.Body) {
		var ch openai.Completion
		if e == "[DONE]" || json.Unmarshal([]byte(e), &ch) != nil {
			continue
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Text)
		}
		if ch.Usage != nil {
			u = ch.Usage
		}
	}
	if text.String() != undisturbed {
		t.Fatalf("migrated stream differs:\n got %q\nwant %q", text.String(), undisturbed)
	}
	if u == nil || u.PromptTokens != 6 || u.CompletionTokens != 70 {
		t.Fatalf("usage %+v", u)
	}
	if n := testutil.ToFloat64(s.Metrics.Migrations.WithLabelValues("tiny")); n != 2 {
		t.Fatalf("migrations metric %v, want 2", n)
	}
}

func TestClientDisconnectCancelsWorker(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", TokenDelay: 10 * time.Millisecond}}})
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/chat/completions", strings.NewReader(chatBody(`"stream":true`)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if _, err := resp.Body.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-s.Workers[0].Cancelled():
	case <-time.After(10 * time.Second):
		t.Fatal("worker did not see the client go away")
	}
	deptest.Eventually(t, 5*time.Second, "the route to be released", func() bool { return len(s.Router.Releases()) != 0 })
}

func TestMidStreamFailureEndsStreamWithError(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", DieAfter: 5, Abort: true}}, noAttempts: true})
	resp := s.post(t, "/v1/completions", `{"model":"tiny","prompt":"Hello","max_tokens":20,"stream":true}`)
	evs := events(t, resp.Body)
	if resp.StatusCode != http.StatusOK || len(evs) < 2 || evs[len(evs)-1] != "[DONE]" || !strings.Contains(evs[len(evs)-2], `"error"`) {
		t.Fatalf("status %d events %q", resp.StatusCode, evs)
	}
}

func TestModelsAndOpenAPI(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	var list openai.ModelList
	resp, err := http.Get(s.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	decode(t, resp, &list)
	if list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "tiny" || list.Data[0].Object != "model" {
		t.Fatalf("models %+v", list)
	}
	resp, _ = http.Get(s.URL + "/v1/models/nope")
	checkError(t, resp, errCase{status: 404, typ: openai.TypeInvalidRequest, code: "model_not_found"})
	resp, _ = http.Get(s.URL + "/v1/models/org/nope") // a model id, not an unknown endpoint
	checkError(t, resp, errCase{status: 404, typ: openai.TypeInvalidRequest, code: "model_not_found"})
	slashed := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", Model: "org/tiny"}}})
	var m openai.Model
	resp, err = http.Get(slashed.URL + "/v1/models/org/tiny")
	if err != nil {
		t.Fatal(err)
	}
	decode(t, resp, &m)
	if m.ID != "org/tiny" || m.Object != "model" {
		t.Fatalf("retrieve org/tiny: %+v", m)
	}
	resp, err = http.Get(s.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths      map[string]map[string]any
		Components struct{ Schemas map[string]map[string]any }
	}
	decode(t, resp, &doc)
	for _, p := range []string{"/v1/chat/completions", "/v1/completions", "/v1/models"} {
		if doc.Paths[p] == nil {
			t.Errorf("openapi lacks %s", p)
		}
	}
	for schema, fields := range map[string][]string{
		"ChatRequest":        {"model", "messages", "stop", "switchyard", "ignore_eos", "max_completion_tokens", "logprobs", "top_logprobs"},
		"CompletionRequest":  {"prompt", "logprobs"},
		"ChatChoice":         {"message", "logprobs"},
		"ChatChunkChoice":    {"delta", "logprobs"},
		"CompletionChoice":   {"text", "logprobs"},
		"ChatLogprobs":       {"content", "refusal"},
		"TokenLogprob":       {"token", "bytes", "logprob", "top_logprobs"},
		"TopLogprob":         {"token", "bytes", "logprob"},
		"CompletionLogprobs": {"tokens", "token_logprobs", "top_logprobs", "text_offset"},
	} {
		props, _ := doc.Components.Schemas[schema]["properties"].(map[string]any)
		for _, f := range fields {
			if props[f] == nil {
				t.Errorf("%s schema lacks %q", schema, f)
			}
		}
	}
	choice, _ := doc.Components.Schemas["ChatChoice"]["properties"].(map[string]any)
	if ref, _ := choice["logprobs"].(map[string]any); ref["$ref"] != "#/components/schemas/ChatLogprobs" {
		t.Errorf("ChatChoice.logprobs is %v", choice["logprobs"])
	}
	lp, _ := doc.Components.Schemas["CompletionLogprobs"]["properties"].(map[string]any)
	if top, _ := lp["top_logprobs"].(map[string]any); fmt.Sprint(top["items"]) != "map[additionalProperties:map[type:number] type:object]" {
		t.Errorf("CompletionLogprobs.top_logprobs is %v", lp["top_logprobs"])
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	completionText(t, s, `{"model":"tiny","prompt":"Hello","max_tokens":5}`)
	s.post(t, "/v1/completions", `{"model":"nope","prompt":"x"}`)
	m := s.Metrics
	if n := testutil.ToFloat64(m.Requests.WithLabelValues(epCompletions, "200")); n != 1 {
		t.Errorf("200s: %v", n)
	}
	if n := testutil.ToFloat64(m.Requests.WithLabelValues(epCompletions, "404")); n != 1 {
		t.Errorf("404s: %v", n)
	}
	if n := testutil.ToFloat64(m.CompletionTokens.WithLabelValues("tiny")); n != 5 {
		t.Errorf("completion tokens: %v", n)
	}
	if n := testutil.CollectAndCount(m.TTFT); n != 1 {
		t.Errorf("ttft series: %d", n)
	}
}
