package vllm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const model = "meta-llama/Llama-3.1-8B-Instruct"

// replay serves a recorded SSE stream at path and hands the decoded
// request body and headers to check.
func replay(t *testing.T, path, fixture string, check func(body map[string]any, h http.Header)) *httptest.Server {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "streams", fixture))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Errorf("request body: %v", err)
		}
		if check != nil {
			check(body, r.Header)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func newClient(t *testing.T, kind Kind, url string) *Client {
	t.Helper()
	c, err := New(Config{Kind: kind, URL: url, Model: model})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// drain reads a stream to its end.
func drain(s *Stream) (tokens []uint32, finish string, err error) {
	defer s.Close()
	for {
		c, err := s.Next()
		if errors.Is(err, io.EOF) {
			return tokens, finish, nil
		}
		if err != nil {
			return tokens, finish, err
		}
		tokens = append(tokens, c.Tokens...)
		if c.FinishReason != "" {
			finish = c.FinishReason
		}
	}
}

// jsonOf re-encodes v as the generic JSON a handler decodes.
func jsonOf(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestGenerateRequestBody(t *testing.T) {
	t.Parallel()
	req := Request{ID: "req-7", Prompt: []uint32{128000, 9906, 11}, MaxTokens: 6, StopTokenIDs: []uint32{128009}}
	seeded := req
	seeded.Seed, seeded.HasSeed, seeded.Temperature, seeded.TopP, seeded.TopK, seeded.MinTokens, seeded.IgnoreEOS = 42, true, 0.7, 0.9, 40, 2, true
	tests := []struct {
		name    string
		kind    Kind
		path    string
		fixture string
		req     Request
		want    map[string]any
	}{
		{"vllm greedy", VLLM, "/v1/completions", "vllm-completions.sse", req, map[string]any{
			"model": model, "prompt": []int{128000, 9906, 11}, "max_tokens": 6, "temperature": 0, "top_p": 1, "top_k": -1,
			"stop_token_ids": []int{128009}, "stream": true, "stream_options": map[string]any{"include_usage": true},
			"logprobs": 0, "return_tokens_as_token_ids": true}},
		{"vllm sampled", VLLM, "/v1/completions", "vllm-completions.sse", seeded, map[string]any{
			"model": model, "prompt": []int{128000, 9906, 11}, "max_tokens": 6, "min_tokens": 2, "temperature": 0.7, "top_p": 0.9,
			"top_k": 40, "seed": 42, "stop_token_ids": []int{128009}, "ignore_eos": true, "stream": true,
			"stream_options": map[string]any{"include_usage": true}, "logprobs": 0, "return_tokens_as_token_ids": true}},
		{"sglang greedy", SGLang, "/generate", "sglang-generate.sse", req, map[string]any{
			"input_ids": []int{128000, 9906, 11}, "stream": true, "rid": "req-7", "sampling_params": map[string]any{
				"max_new_tokens": 6, "temperature": 0, "top_p": 1, "top_k": -1, "stop_token_ids": []int{128009}}}},
		{"sglang sampled", SGLang, "/generate", "sglang-generate.sse", seeded, map[string]any{
			"input_ids": []int{128000, 9906, 11}, "stream": true, "rid": "req-7", "sampling_params": map[string]any{
				"max_new_tokens": 6, "min_new_tokens": 2, "temperature": 0.7, "top_p": 0.9, "top_k": 40,
				"stop_token_ids": []int{128009}, "ignore_eos": true, "sampling_seed": 42}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := replay(t, tt.path, tt.fixture, func(body map[string]any, h http.Header) {
				if want := jsonOf(t, tt.want); !reflect.DeepEqual(body, want) {
					t.Errorf("body\n %v\nwant\n %v", body, want)
				}
				if tt.kind == VLLM && h.Get("X-Request-Id") != "req-7" {
					t.Errorf("X-Request-Id %q", h.Get("X-Request-Id"))
				}
			})
			s, err := newClient(t, tt.kind, srv.URL).Generate(t.Context(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := drain(s); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestGenerateRecordedStreams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind    Kind
		fixture string
		tokens  []uint32
		finish  string
		usage   Usage
		errHas  string
	}{
		// Tokens come from logprobs, not text: a chunk with empty text
		// (half a multi-byte character) still carries its token, and one
		// chunk may carry two.
		{VLLM, "vllm-completions.sse", []uint32{9843, 5304, 11410, 234, 264, 892}, FinishLength,
			Usage{PromptTokens: 40, CompletionTokens: 6, CachedTokens: 32, HasCachedTokens: true}, ""},
		// Without --enable-prompt-tokens-details vLLM sends no cached count;
		// the stop token is returned as the engine reports it.
		{VLLM, "vllm-completions-stop.sse", []uint32{578, 128009}, FinishStop,
			Usage{PromptTokens: 12, CompletionTokens: 2}, ""},
		{VLLM, "vllm-error.sse", []uint32{9843}, "", Usage{}, "EngineCore encountered an issue"},
		{VLLM, "vllm-text-only.sse", nil, "", Usage{}, "return_tokens_as_token_ids"},
		// Cumulative output_ids, one of them serialized after the engine's
		// count was taken (3 ids, completion_tokens 2).
		{SGLang, "sglang-generate.sse", []uint32{9843, 5304, 264, 892, 11}, FinishLength,
			Usage{PromptTokens: 40, CompletionTokens: 5, CachedTokens: 32, HasCachedTokens: true}, ""},
		// --incremental-streaming-output: deltas.
		{SGLang, "sglang-generate-incremental.sse", []uint32{9843, 5304, 264, 892, 11}, FinishStop,
			Usage{PromptTokens: 40, CompletionTokens: 5, CachedTokens: 32, HasCachedTokens: true}, ""},
		{SGLang, "sglang-abort.sse", nil, "", Usage{}, "longer than the model's context length"},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			t.Parallel()
			path := "/v1/completions"
			if tt.kind == SGLang {
				path = "/generate"
			}
			srv := replay(t, path, tt.fixture, nil)
			s, err := newClient(t, tt.kind, srv.URL).Generate(t.Context(), Request{Prompt: []uint32{1, 2, 3}, MaxTokens: 6})
			if err != nil {
				t.Fatal(err)
			}
			tokens, finish, err := drain(s)
			if !reflect.DeepEqual(tokens, tt.tokens) || finish != tt.finish {
				t.Errorf("tokens %v finish %q; want %v %q", tokens, finish, tt.tokens, tt.finish)
			}
			if tt.errHas != "" {
				var ee *EngineError
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("err %v; want one containing %q", err, tt.errHas)
				}
				if tt.fixture == "sglang-abort.sse" && (!errors.As(err, &ee) || !ee.BadRequest()) {
					t.Errorf("abort error %v is not a bad request", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u, ok := s.Usage(); !ok || u != tt.usage {
				t.Errorf("usage %+v, %v; want %+v", u, ok, tt.usage)
			}
		})
	}
}

func TestGenerateRefused(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9006 tokens (9000 in the messages, 6 in the completion).","type":"BadRequestError","param":null,"code":400}`)
	}))
	defer srv.Close()
	_, err := newClient(t, VLLM, srv.URL).Generate(t.Context(), Request{Prompt: []uint32{1}, MaxTokens: 6})
	var ee *EngineError
	if !errors.As(err, &ee) || !ee.BadRequest() || !strings.HasPrefix(ee.Message, "This model's maximum context length") {
		t.Fatalf("err %v; want the engine's 400 with its message", err)
	}
}

func TestGenerateValidates(t *testing.T) {
	t.Parallel()
	c := newClient(t, VLLM, "http://127.0.0.1:1")
	for _, r := range []Request{
		{MaxTokens: 1},
		{Prompt: []uint32{1}},
		{Prompt: []uint32{1}, MaxTokens: 2, MinTokens: 3},
		{Prompt: []uint32{1}, MaxTokens: 2, Temperature: -1},
		{Prompt: []uint32{1}, MaxTokens: 2, TopP: 1.5},
	} {
		if _, err := c.Generate(t.Context(), r); err == nil {
			t.Errorf("Generate(%+v) succeeded", r)
		}
	}
}

// Closing a stream, or cancelling its context, closes the connection,
// which the engine takes as an abort.
func TestGenerateCancel(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"close", "cancel"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			gone := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"text":" Once","logprobs":{"tokens":["token_id:9843"]},"finish_reason":null}],"usage":null}`+"\n\n")
				w.(http.Flusher).Flush()
				<-r.Context().Done() // the engine notices the disconnect
				close(gone)
			}))
			defer srv.Close()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			s, err := newClient(t, VLLM, srv.URL).Generate(ctx, Request{Prompt: []uint32{1}, MaxTokens: 100})
			if err != nil {
				t.Fatal(err)
			}
			if c, err := s.Next(); err != nil || !reflect.DeepEqual(c.Tokens, []uint32{9843}) {
				t.Fatalf("first chunk %+v, %v", c, err)
			}
			if how == "close" {
				_ = s.Close()
			} else {
				cancel()
				if _, err := s.Next(); !errors.Is(err, context.Canceled) {
					t.Errorf("Next after cancel = %v; want context.Canceled", err)
				}
				defer s.Close()
			}
			select {
			case <-gone:
			case <-t.Context().Done():
				t.Fatal("the engine never saw the request go")
			}
		})
	}
}

// A stream cut before the finish reason is an error, not a short answer.
func TestGenerateTruncated(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `data: {"text":" Once","output_ids":[9843],"meta_info":{"finish_reason":null,"prompt_tokens":3,"completion_tokens":1,"cached_tokens":0}}`+"\n\n")
	}))
	defer srv.Close()
	s, err := newClient(t, SGLang, srv.URL).Generate(t.Context(), Request{Prompt: []uint32{1}, MaxTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	if tokens, _, err := drain(s); err == nil || !reflect.DeepEqual(tokens, []uint32{9843}) {
		t.Fatalf("tokens %v, err %v; want [9843] and an error", tokens, err)
	}
}
