package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"switchyard.dev/loadtest/internal/fakeopenai"
	"switchyard.dev/loadtest/internal/metrics"
)

func newClient(t *testing.T, url string, mode Mode) *Client {
	t.Helper()
	c, err := New(Config{BaseURL: url + "/v1/", APIKey: "sk-test", Model: "m", Mode: mode, ExtraBody: `{"temperature":0}`}, NewHTTPClient(4, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestStreamAgainstFake(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		mode      Mode
		noUsage   bool
		req       Request
		wantOut   int
		wantReply string
	}{
		{name: "completions tokens", mode: Completions, req: Request{Tokens: []int{5, 6, 7}, MaxTokens: 4, IgnoreEOS: true}, wantOut: 4},
		{name: "completions no usage counts chunks", mode: Completions, noUsage: true, req: Request{Text: "hi there", MaxTokens: 3}, wantOut: 3},
		{name: "chat", mode: Chat, req: Request{Messages: []Message{{Role: "user", Content: "a b"}}, MaxTokens: 2, WantReply: true}, wantOut: 2, wantReply: " w0 w1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := fakeopenai.New("m")
			fake.NoUsage = tt.noUsage
			srv := httptest.NewServer(fake)
			t.Cleanup(srv.Close)
			c := newClient(t, srv.URL, tt.mode)
			var rec metrics.Record
			reply := c.Stream(t.Context(), tt.req, &rec)
			if !rec.OK() {
				t.Fatalf("request failed: %s", rec.Err)
			}
			if rec.OutputTokens != tt.wantOut || rec.Chunks != tt.wantOut || len(rec.ITLs) != tt.wantOut-1 {
				t.Fatalf("out %d chunks %d itls %d, want %d", rec.OutputTokens, rec.Chunks, len(rec.ITLs), tt.wantOut)
			}
			if rec.UsageReported == tt.noUsage {
				t.Fatalf("UsageReported = %v", rec.UsageReported)
			}
			if reply != tt.wantReply {
				t.Fatalf("reply %q, want %q", reply, tt.wantReply)
			}
			if rec.TTFT <= 0 || rec.E2E < rec.TTFT {
				t.Fatalf("TTFT %v E2E %v out of order", rec.TTFT, rec.E2E)
			}
			got := fake.Received()[0]
			if got.Auth != "Bearer sk-test" || got.Model != "m" || !got.IncludeUsage || got.HasStop ||
				got.IgnoreEOS != tt.req.IgnoreEOS || string(got.ExtraFields["temperature"]) != "0" {
				t.Fatalf("server received %+v", got)
			}
			if tt.req.Tokens != nil && fmt.Sprint(got.PromptTokens) != fmt.Sprint(tt.req.Tokens) {
				t.Fatalf("prompt %v, want %v", got.PromptTokens, tt.req.Tokens)
			}
		})
	}
}

func TestStreamCachedTokens(t *testing.T) {
	t.Parallel()
	fake := fakeopenai.New("m")
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL, Completions)
	prompt := make([]int, 3*fakeopenai.CacheBlock)
	var first, second metrics.Record
	c.Stream(t.Context(), Request{Tokens: prompt, MaxTokens: 1}, &first)
	c.Stream(t.Context(), Request{Tokens: prompt, MaxTokens: 1}, &second)
	if first.CachedTokens != 0 || second.CachedTokens != len(prompt) || second.PromptTokens != len(prompt) {
		t.Fatalf("cached %d then %d (prompt %d)", first.CachedTokens, second.CachedTokens, second.PromptTokens)
	}
}

// A token that decodes to no text (here the only one) still ends the wait
// for output: the finishing chunk counts as the first output.
func TestStreamTokenWithoutText(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"choices":[{"index":0,"text":"","finish_reason":"length"}]}`+"\n\n"+
			`data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1}}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	var rec metrics.Record
	newClient(t, srv.URL, Completions).Stream(t.Context(), Request{Text: "x", MaxTokens: 1}, &rec)
	if rec.Err != "" || rec.Chunks != 1 || rec.OutputTokens != 1 || rec.TTFT <= 0 {
		t.Fatalf("err %q chunks %d output %d ttft %v", rec.Err, rec.Chunks, rec.OutputTokens, rec.TTFT)
	}
}

func TestStreamErrors(t *testing.T) {
	t.Parallel()
	sse := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			fmt.Fprint(w, body)
		}
	}
	tests := []struct {
		name    string
		h       http.HandlerFunc
		wantErr string
		status  int
	}{
		{name: "500 with openai error", status: 500, wantErr: "HTTP 500: overloaded", h: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":{"message":"overloaded"}}`)
		}},
		{name: "404 plain", status: 404, wantErr: "HTTP 404: 404 page not found", h: http.NotFound},
		{name: "vllm style error", status: 400, wantErr: "HTTP 400: too long", h: func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"object":"error","message":"too long"}`)
		}},
		{name: "html", status: 200, wantErr: "not an OpenAI stream: Content-Type", h: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html/>")
		}},
		{name: "garbage chunk", status: 200, wantErr: "not an OpenAI stream chunk", h: sse("data: hello\n\n")},
		{name: "no done", status: 200, wantErr: "without data: [DONE]", h: sse("data: {\"choices\":[{\"text\":\"a\"}]}\n\n")},
		{name: "no tokens", status: 200, wantErr: "no output tokens", h: sse("data: [DONE]\n\n")},
		{name: "error chunk", status: 200, wantErr: "server error in stream", h: sse("data: {\"error\":{\"message\":\"oom\"}}\n\n")},
		{name: "error event", status: 200, wantErr: "server error event", h: sse("event: error\ndata: oom\n\n")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tt.h)
			t.Cleanup(srv.Close)
			var rec metrics.Record
			newClient(t, srv.URL, Completions).Stream(t.Context(), Request{Text: "x", MaxTokens: 1}, &rec)
			if !strings.Contains(rec.Err, tt.wantErr) || rec.Canceled || rec.Status != tt.status {
				t.Fatalf("err %q status %d canceled %v; want %q status %d", rec.Err, rec.Status, rec.Canceled, tt.wantErr, tt.status)
			}
		})
	}
}

func TestStreamUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c := newClient(t, url, Completions)
	var rec metrics.Record
	c.Stream(t.Context(), Request{Text: "x", MaxTokens: 1}, &rec)
	if !strings.Contains(rec.Err, "connect") || rec.Canceled {
		t.Fatalf("err %q, want a connection error", rec.Err)
	}
	if _, err := c.Models(t.Context()); err == nil {
		t.Fatal("Models on a closed server succeeded")
	}
}

func TestStreamCanceled(t *testing.T) {
	t.Parallel()
	fake := fakeopenai.New("m")
	fake.Block = make(chan struct{})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(fake.Block) })
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan metrics.Record)
	go func() {
		var rec metrics.Record
		newClient(t, srv.URL, Completions).Stream(ctx, Request{Text: "x", MaxTokens: 1}, &rec)
		done <- rec
	}()
	for len(fake.Received()) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel(fmt.Errorf("interrupted"))
	rec := <-done
	if !rec.Canceled || !strings.Contains(rec.Err, "interrupted") {
		t.Fatalf("record %+v, want canceled by interrupted", rec)
	}
}

func TestModels(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(fakeopenai.New("tiny"))
	t.Cleanup(srv.Close)
	ids, err := newClient(t, srv.URL, Completions).Models(t.Context())
	if err != nil || len(ids) != 1 || ids[0] != "tiny" {
		t.Fatalf("Models = %v, %v", ids, err)
	}
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	tests := []Config{
		{BaseURL: "localhost:8000"},
		{BaseURL: "http://x", Mode: "embeddings"},
		{BaseURL: "http://x", ExtraBody: "[1]"},
	}
	for _, cfg := range tests {
		if _, err := New(cfg, http.DefaultClient); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

func TestBody(t *testing.T) {
	t.Parallel()
	c, _ := New(Config{BaseURL: "http://x", Model: "m"}, http.DefaultClient)
	b, err := c.Body(Request{Tokens: []int{1, 2}, MaxTokens: 9, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","prompt":[1,2],"max_tokens":9,"stream":true,"stream_options":{"include_usage":true},"ignore_eos":true}`
	if string(b) != want {
		t.Fatalf("body\n%s\nwant\n%s", b, want)
	}
	if !json.Valid(b) {
		t.Fatal("invalid JSON")
	}
}

func TestBodyExtra(t *testing.T) {
	t.Parallel()
	const override = `{ "z": {"b": [1, 2], "a": "<&>"}, "max_tokens": 5, "stream": false, "model": "other", "ignore_eos": false, "aa": null }`
	tests := []struct {
		name  string
		mode  Mode
		extra string
		req   Request
		want  string
	}{
		{
			name:  "added field, keys sorted",
			mode:  Completions,
			extra: `{"temperature":0}`,
			req:   Request{Tokens: []int{1, 2}, MaxTokens: 9, IgnoreEOS: true},
			want:  `{"ignore_eos":true,"max_tokens":9,"model":"m","prompt":[1,2],"stream":true,"stream_options":{"include_usage":true},"temperature":0}`,
		},
		{
			name:  "empty text prompt is still sent",
			mode:  Completions,
			extra: `{"temperature":0}`,
			req:   Request{MaxTokens: 1},
			want:  `{"max_tokens":1,"model":"m","prompt":"","stream":true,"stream_options":{"include_usage":true},"temperature":0}`,
		},
		{
			name:  "extra fields win, values compacted and HTML-escaped",
			mode:  Completions,
			extra: override,
			req:   Request{Text: "<b>", MaxTokens: 9, IgnoreEOS: true},
			want:  `{"aa":null,"ignore_eos":false,"max_tokens":5,"model":"other","prompt":"\u003cb\u003e","stream":false,"stream_options":{"include_usage":true},"z":{"b":[1,2],"a":"\u003c\u0026\u003e"}}`,
		},
		{
			name:  "chat",
			mode:  Chat,
			extra: `{"top_p":0.5}`,
			req:   Request{Tokens: []int{1}, Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 2},
			want:  `{"max_tokens":2,"messages":[{"role":"user","content":"hi"}],"model":"m","stream":true,"stream_options":{"include_usage":true},"top_p":0.5}`,
		},
		{
			name:  "empty object adds nothing",
			mode:  Chat,
			extra: `{}`,
			req:   Request{MaxTokens: 2},
			want:  `{"model":"m","max_tokens":2,"stream":true,"stream_options":{"include_usage":true}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := New(Config{BaseURL: "http://x", Model: "m", Mode: tt.mode, ExtraBody: tt.extra}, http.DefaultClient)
			if err != nil {
				t.Fatal(err)
			}
			b, err := c.Body(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Fatalf("body\n%s\nwant\n%s", b, tt.want)
			}
		})
	}
}

// TestBodyMergedMatchesStruct keeps the map built for extra fields in step
// with the body struct's fields and omitempty rules.
func TestBodyMergedMatchesStruct(t *testing.T) {
	t.Parallel()
	reqs := []Request{
		{Tokens: []int{1, 2}, MaxTokens: 9, IgnoreEOS: true},
		{Tokens: []int{}, MaxTokens: 1},
		{Text: "a <b>"},
		{Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 3},
		{},
	}
	for _, mode := range []Mode{Completions, Chat} {
		plain, err := New(Config{BaseURL: "http://x", Model: "m", Mode: mode}, http.DefaultClient)
		if err != nil {
			t.Fatal(err)
		}
		extra, err := New(Config{BaseURL: "http://x", Model: "m", Mode: mode, ExtraBody: `{"x_extra":1}`}, http.DefaultClient)
		if err != nil {
			t.Fatal(err)
		}
		for _, req := range reqs {
			var want, got map[string]any
			decode(t, plain, req, &want)
			decode(t, extra, req, &got)
			if got["x_extra"] != 1.0 {
				t.Fatalf("%s %+v: extra field missing: %v", mode, req, got)
			}
			delete(got, "x_extra")
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %+v:\nmerged %v\nstruct %v", mode, req, got, want)
			}
		}
	}
}

func decode(t *testing.T, c *Client, req Request, v any) {
	t.Helper()
	b, err := c.Body(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

func FuzzStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]"))
	f.Add([]byte("data: {\"error\":null,\"choices\":null}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var rec metrics.Record
		m := measure{rec: &rec, start: time.Now(), reply: &strings.Builder{}, wantReply: true}
		err := m.read(bytes.NewReader(in))
		if err == nil && (rec.Chunks == 0 || rec.OutputTokens < 0) {
			t.Fatalf("accepted a stream with %d chunks, %d tokens", rec.Chunks, rec.OutputTokens)
		}
		if len(rec.ITLs) != max(0, rec.Chunks-1) {
			t.Fatalf("%d ITLs for %d chunks", len(rec.ITLs), rec.Chunks)
		}
	})
}

func BenchmarkMeasureStream(b *testing.B) {
	const events = 1000
	var buf bytes.Buffer
	for range events {
		buf.WriteString(`data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n")
	}
	buf.WriteString(`data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":1000,"prompt_tokens_details":{"cached_tokens":0}}}` + "\n\ndata: [DONE]\n\n")
	in := buf.Bytes()
	rd := bytes.NewReader(in)
	rec := metrics.Record{ITLs: make([]time.Duration, 0, events)}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(in)
		rec = metrics.Record{ITLs: rec.ITLs[:0]}
		m := measure{rec: &rec, start: time.Now(), reply: &strings.Builder{}}
		if err := m.read(rd); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(events+2)), "ns/event")
}
