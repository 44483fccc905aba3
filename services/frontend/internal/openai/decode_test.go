package openai

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestDecodeChat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		body  string
		param string // "" with ok
		ok    bool
		check func(t *testing.T, r *ChatRequest, g Generation)
	}{
		{name: "minimal", body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, ok: true,
			check: func(t *testing.T, r *ChatRequest, g Generation) {
				if g.Temperature != 1 || g.TopP != 1 || g.MaxTokens != 0 || r.Messages[0].Content.Text != "hi" {
					t.Errorf("defaults: %+v", g)
				}
			}},
		{name: "parts", body: `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}`, ok: true,
			check: func(t *testing.T, r *ChatRequest, _ Generation) {
				if r.Messages[0].Content.Text != "ab" {
					t.Errorf("content %q", r.Messages[0].Content.Text)
				}
			}},
		{name: "max_completion_tokens wins", body: `{"model":"m","max_tokens":5,"max_completion_tokens":7,"messages":[{"role":"user","content":"x"}]}`, ok: true,
			check: func(t *testing.T, _ *ChatRequest, g Generation) {
				if g.MaxTokens != 7 || g.MaxTokensParam != "max_completion_tokens" {
					t.Errorf("got %d %s", g.MaxTokens, g.MaxTokensParam)
				}
			}},
		{name: "stop string", body: `{"model":"m","stop":"\n","messages":[{"role":"user","content":"x"}]}`, ok: true,
			check: func(t *testing.T, _ *ChatRequest, g Generation) {
				if len(g.Stop) != 1 || g.Stop[0] != "\n" {
					t.Errorf("stop %q", g.Stop)
				}
			}},
		{name: "stop list and hints", body: `{"model":"m","stop":["a","b"],"switchyard":{"priority":3,"session_id":"s"},"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`, ok: true,
			check: func(t *testing.T, _ *ChatRequest, g Generation) {
				if len(g.Stop) != 2 || g.Hints.Priority != 3 || g.Hints.SessionID != "s" || !g.IncludeUsage {
					t.Errorf("got %+v", g)
				}
			}},
		{name: "not object", body: `[1]`, param: ""},
		{name: "malformed", body: `{"model":`, param: ""},
		{name: "wrong type", body: `{"model":"m","temperature":"hot","messages":[{"role":"user","content":"x"}]}`, param: "temperature"},
		{name: "no model", body: `{"messages":[{"role":"user","content":"x"}]}`, param: "model"},
		{name: "no messages", body: `{"model":"m","messages":[]}`, param: "messages"},
		{name: "bad role", body: `{"model":"m","messages":[{"role":"robot","content":"x"}]}`, param: "messages[0].role"},
		{name: "null content", body: `{"model":"m","messages":[{"role":"user","content":null}]}`, param: "messages[0].content"},
		{name: "image part", body: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, param: "messages[0].content[0].type"},
		{name: "temperature", body: `{"model":"m","temperature":2.5,"messages":[{"role":"user","content":"x"}]}`, param: "temperature"},
		{name: "top_p zero", body: `{"model":"m","top_p":0,"messages":[{"role":"user","content":"x"}]}`, param: "top_p"},
		{name: "max_tokens zero", body: `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, param: "max_tokens"},
		{name: "logprobs", body: `{"model":"m","logprobs":true,"messages":[{"role":"user","content":"x"}]}`, ok: true,
			check: func(t *testing.T, _ *ChatRequest, g Generation) {
				if !g.Logprobs || g.TopLogprobs != 0 {
					t.Errorf("logprobs %v top %d", g.Logprobs, g.TopLogprobs)
				}
			}},
		{name: "top_logprobs 20", body: `{"model":"m","logprobs":true,"top_logprobs":20,"messages":[{"role":"user","content":"x"}]}`, ok: true,
			check: func(t *testing.T, _ *ChatRequest, g Generation) {
				if !g.Logprobs || g.TopLogprobs != 20 {
					t.Errorf("logprobs %v top %d", g.Logprobs, g.TopLogprobs)
				}
			}},
		{name: "logprobs off", body: `{"model":"m","logprobs":false,"top_logprobs":0,"messages":[{"role":"user","content":"x"}]}`, ok: true,
			check: func(t *testing.T, _ *ChatRequest, g Generation) {
				if g.Logprobs || g.TopLogprobs != 0 {
					t.Errorf("logprobs %v top %d", g.Logprobs, g.TopLogprobs)
				}
			}},
		{name: "logprobs null", body: `{"model":"m","logprobs":null,"top_logprobs":null,"messages":[{"role":"user","content":"x"}]}`, ok: true,
			check: func(t *testing.T, _ *ChatRequest, g Generation) {
				if g.Logprobs || g.TopLogprobs != 0 {
					t.Errorf("logprobs %v top %d", g.Logprobs, g.TopLogprobs)
				}
			}},
		{name: "top_logprobs without logprobs", body: `{"model":"m","top_logprobs":2,"messages":[{"role":"user","content":"x"}]}`, param: "top_logprobs"},
		{name: "top_logprobs with logprobs false", body: `{"model":"m","logprobs":false,"top_logprobs":2,"messages":[{"role":"user","content":"x"}]}`, param: "top_logprobs"},
		{name: "top_logprobs 21", body: `{"model":"m","logprobs":true,"top_logprobs":21,"messages":[{"role":"user","content":"x"}]}`, param: "top_logprobs"},
		{name: "top_logprobs negative", body: `{"model":"m","logprobs":true,"top_logprobs":-1,"messages":[{"role":"user","content":"x"}]}`, param: "top_logprobs"},
		{name: "logprobs not bool", body: `{"model":"m","logprobs":1,"messages":[{"role":"user","content":"x"}]}`, param: "logprobs"},
		{name: "empty stop", body: `{"model":"m","stop":[""],"messages":[{"role":"user","content":"x"}]}`, param: "stop"},
		{name: "stream_options without stream", body: `{"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]}`, param: "stream_options"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, g, err := DecodeChat([]byte(tc.body))
			if tc.ok {
				if err != nil {
					t.Fatalf("DecodeChat: %v", err)
				}
				tc.check(t, r, g)
				return
			}
			var apiErr *Error
			if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Param != tc.param {
				t.Fatalf("want 400 param %q, got %v", tc.param, err)
			}
		})
	}
}

func TestDecodeCompletion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		body   string
		texts  int
		tokens int
		param  string
		// logprobs is the Generation's TopLogprobs, or -1 for no logprobs.
		logprobs int
	}{
		{name: "string", body: `{"model":"m","prompt":"once"}`, texts: 1},
		{name: "one string list", body: `{"model":"m","prompt":["once"]}`, texts: 1},
		{name: "ids", body: `{"model":"m","prompt":[1,2,3]}`, tokens: 1},
		{name: "id lists", body: `{"model":"m","prompt":[[1,2,3]]}`, tokens: 1},
		{name: "two prompts", body: `{"model":"m","prompt":["a","b"]}`, param: "prompt"},
		{name: "two id lists", body: `{"model":"m","prompt":[[1],[2]]}`, param: "prompt"},
		{name: "no prompt", body: `{"model":"m"}`, param: "prompt"},
		{name: "empty list", body: `{"model":"m","prompt":[]}`, param: "prompt"},
		{name: "negative id", body: `{"model":"m","prompt":[-1]}`, param: "prompt"},
		{name: "mixed list", body: `{"model":"m","prompt":[1,"a"]}`, param: "prompt"},
		{name: "echo with logprobs", body: `{"model":"m","prompt":"a","echo":true,"logprobs":1}`, param: "echo"},
		{name: "logprobs 2", body: `{"model":"m","prompt":"a","logprobs":2}`, texts: 1, logprobs: 2},
		{name: "logprobs 0", body: `{"model":"m","prompt":"a","logprobs":0}`, texts: 1, logprobs: 0},
		{name: "logprobs 5", body: `{"model":"m","prompt":"a","logprobs":5}`, texts: 1, logprobs: 5},
		{name: "logprobs null", body: `{"model":"m","prompt":"a","logprobs":null}`, texts: 1, logprobs: -1},
		{name: "logprobs 6", body: `{"model":"m","prompt":"a","logprobs":6}`, param: "logprobs"},
		{name: "logprobs negative", body: `{"model":"m","prompt":"a","logprobs":-1}`, param: "logprobs"},
		{name: "logprobs bool", body: `{"model":"m","prompt":"a","logprobs":true}`, param: "logprobs"},
		{name: "best_of", body: `{"model":"m","prompt":"a","best_of":3}`, param: "best_of"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, g, err := DecodeCompletion([]byte(tc.body))
			if tc.param != "" {
				var apiErr *Error
				if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Param != tc.param {
					t.Fatalf("want 400 param %q, got %v", tc.param, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeCompletion: %v", err)
			}
			if len(r.Prompt.Texts) != tc.texts || len(r.Prompt.Tokens) != tc.tokens {
				t.Fatalf("prompt %+v", r.Prompt)
			}
			if want := tc.logprobs >= 0 && strings.Contains(tc.body, "logprobs"); g.Logprobs != want || want && g.TopLogprobs != tc.logprobs {
				t.Fatalf("logprobs %v top %d, want %d", g.Logprobs, g.TopLogprobs, tc.logprobs)
			}
		})
	}
}

func TestErrorEnvelope(t *testing.T) {
	t.Parallel()
	b, err := Invalid("", "bad").MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":"invalid_value"}}`
	if string(b) != want {
		t.Fatalf("got %s\nwant %s", b, want)
	}
}

// A field the server does not know is a 400 naming it, as OpenAI answers;
// one of OpenAI's that it does not honour is a 400 saying so; neither is
// ignored. Both decoders, and the token-prompt fast path, agree.
func TestStrictFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, param, code, message string
		chat                             bool
	}{
		{"unknown, chat", `{"model":"m","messages":[{"role":"user","content":"hi"}],"frobnicate":1}`, "frobnicate", CodeUnknownParameter, "Unrecognized request argument supplied: frobnicate", true},
		{"unknown, completion", `{"model":"m","prompt":"a","frobnicate":1}`, "frobnicate", CodeUnknownParameter, "Unrecognized request argument supplied: frobnicate", false},
		{"unknown, token prompt", `{"prompt":[1,2,3],"model":"m","frobnicate":1}`, "frobnicate", CodeUnknownParameter, "Unrecognized", false},
		{"unknown in a message", `{"model":"m","messages":[{"role":"user","content":"hi","colour":"red"}]}`, "colour", CodeUnknownParameter, "Unrecognized", true},
		{"functions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"functions":[{"name":"f"}]}`, "functions", CodeUnsupported, "use tools", true},
		{"function_call", `{"model":"m","messages":[{"role":"user","content":"hi"}],"function_call":"auto"}`, "function_call", CodeUnsupported, "use tool_choice", true},
		{"tools, completion", `{"model":"m","prompt":"a","tools":[]}`, "tools", CodeUnsupported, "only supported by chat completions", false},
		{"function message", `{"model":"m","messages":[{"role":"function","content":"42","name":"f"}]}`, "messages[0].role", CodeUnsupported, "use tool messages", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var err error
			if tc.chat {
				_, _, err = DecodeChat([]byte(tc.body))
			} else {
				_, _, err = DecodeCompletion([]byte(tc.body))
			}
			var apiErr *Error
			switch {
			case !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Code != tc.code:
				t.Fatalf("want 400 %s, got %v", tc.code, err)
			case tc.param != "" && apiErr.Param != tc.param:
				t.Errorf("param %q, want %q", apiErr.Param, tc.param)
			case tc.param == "" && apiErr.Param != "tools" && apiErr.Param != "tool_choice":
				t.Errorf("param %q, want tools or tool_choice", apiErr.Param)
			case !strings.Contains(apiErr.Message, tc.message):
				t.Errorf("message %q, want it to contain %q", apiErr.Message, tc.message)
			}
		})
	}
}

// Data after the request's object is malformed JSON, said as such.
func TestTrailingData(t *testing.T) {
	t.Parallel()
	_, _, err := DecodeCompletion([]byte(`{"model":"m","prompt":"a"} {}`))
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || !strings.Contains(apiErr.Message, "data after the JSON object at byte") {
		t.Fatalf("got %v", err)
	}
}
