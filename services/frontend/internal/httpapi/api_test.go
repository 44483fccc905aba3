package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"switchyard.dev/services/frontend/internal/openai"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

func TestChat(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w1", Cached: 4}}})
	resp := s.post(t, "/v1/chat/completions", chatBody(`"max_tokens":30`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var got openai.ChatCompletion
	decode(t, resp, &got)
	if !strings.HasPrefix(got.ID, "chatcmpl-") || got.Object != "chat.completion" || got.Model != "tiny" || got.Created == 0 {
		t.Fatalf("envelope %+v", got)
	}
	c := got.Choices[0]
	if c.Message.Role != "assistant" || c.Message.Content != want(chatPromptLen, 30) || c.FinishReason != "length" {
		t.Fatalf("choice %+v", c)
	}
	u := got.Usage
	if u.PromptTokens != chatPromptLen || u.CompletionTokens != 30 || u.TotalTokens != chatPromptLen+30 || u.PromptTokensDetails.CachedTokens != 4 {
		t.Fatalf("usage %+v", u)
	}
}

func TestChatStream(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	for _, includeUsage := range []bool{false, true} {
		extra := `"max_tokens":25,"stream":true`
		if includeUsage {
			extra += `,"stream_options":{"include_usage":true}`
		}
		resp := s.post(t, "/v1/chat/completions", chatBody(extra))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("status %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		evs := events(t, resp.Body)
		if evs[len(evs)-1] != "[DONE]" {
			t.Fatalf("last event %q", evs[len(evs)-1])
		}
		var text strings.Builder
		var finish string
		var usage *openai.Usage
		for i, e := range evs[:len(evs)-1] {
			var ch openai.ChatChunk
			if err := json.Unmarshal([]byte(e), &ch); err != nil {
				t.Fatal(err)
			}
			if ch.Object != "chat.completion.chunk" || !strings.HasPrefix(ch.ID, "chatcmpl-") {
				t.Fatalf("chunk %s", e)
			}
			if i == 0 && (len(ch.Choices) != 1 || ch.Choices[0].Delta.Role != "assistant") {
				t.Fatalf("first chunk %s", e)
			}
			if ch.Usage != nil {
				usage = ch.Usage
				if len(ch.Choices) != 0 {
					t.Fatalf("usage chunk has choices: %s", e)
				}
				continue
			}
			if d := ch.Choices[0].Delta.Content; d != nil {
				text.WriteString(*d)
			}
			if r := ch.Choices[0].FinishReason; r != nil {
				finish = *r
			}
		}
		if text.String() != want(chatPromptLen, 25) || finish != "length" {
			t.Fatalf("streamed %q finish %q", text.String(), finish)
		}
		if includeUsage != (usage != nil) || usage != nil && (usage.CompletionTokens != 25 || usage.PromptTokens != chatPromptLen) {
			t.Fatalf("include_usage=%v usage %+v", includeUsage, usage)
		}
	}
}

func TestCompletions(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	tests := []struct {
		name, prompt string
		promptLen    int
	}{
		{"string", `"Hello"`, 6},
		{"one string list", `["Hello"]`, 6},
		{"token ids", `[1, 72, 105]`, 3},
		{"token id lists", `[[1, 72]]`, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := s.post(t, "/v1/completions", `{"model":"tiny","max_tokens":12,"prompt":`+tc.prompt+`}`)
			var got openai.Completion
			decode(t, resp, &got)
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(got.ID, "cmpl-") || got.Object != "text_completion" {
				t.Fatalf("status %d %+v", resp.StatusCode, got)
			}
			if got.Choices[0].Text != want(tc.promptLen, 12) || *got.Choices[0].FinishReason != "length" || got.Usage.PromptTokens != tc.promptLen {
				t.Fatalf("got %+v usage %+v", got.Choices[0], got.Usage)
			}
		})
	}
}

func TestCompletionStream(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	resp := s.post(t, "/v1/completions", `{"model":"tiny","max_tokens":10,"prompt":"Hello","stream":true,"stream_options":{"include_usage":true}}`)
	evs := events(t, resp.Body)
	var text strings.Builder
	var last openai.Completion
	for _, e := range evs[:len(evs)-1] {
		var ch openai.Completion
		if err := json.Unmarshal([]byte(e), &ch); err != nil {
			t.Fatal(err)
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Text)
		}
		last = ch
	}
	if text.String() != want(6, 10) || last.Usage == nil || last.Usage.CompletionTokens != 10 || evs[len(evs)-1] != "[DONE]" {
		t.Fatalf("text %q last %+v", text.String(), last)
	}
}
