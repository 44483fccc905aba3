package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"switchyard.dev/services/frontend/internal/auth"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

// The official Go SDK talks to the frontend unchanged.

func sdkClient(s *stack, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(s.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

func TestSDKChat(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{guard: auth.New(auth.Config{Keys: []string{"sk-test"}})})
	c := sdkClient(s, "sk-test")
	params := openai.ChatCompletionNewParams{
		Model:     "tiny",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
		MaxTokens: openai.Int(20),
		Stop:      openai.ChatCompletionNewParamsStopUnion{OfStringArray: []string{"zebra"}},
	}
	got, err := c.Chat.Completions.New(t.Context(), params, option.WithJSONSet("switchyard", map[string]any{"priority": 2}))
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content != want(chatPromptLen, 20) || got.Choices[0].FinishReason != "length" || got.Usage.CompletionTokens != 20 {
		t.Fatalf("got %+v", got)
	}
	if p := s.Router.Routes()[0].GetHints().GetPriority(); p != 2 {
		t.Fatalf("extension priority %d", p)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(t.Context(), params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != want(chatPromptLen, 20) || acc.Usage.CompletionTokens != 20 || acc.Usage.PromptTokens != int64(chatPromptLen) {
		t.Fatalf("streamed %q usage %+v", acc.Choices[0].Message.Content, acc.Usage)
	}
}

func TestSDKCompletionsAndModels(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", Cached: 3}}})
	c := sdkClient(s, "unused")
	got, err := c.Completions.New(t.Context(), openai.CompletionNewParams{
		Model: "tiny", Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: []int64{1, 72, 101}}, MaxTokens: openai.Int(8),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Text != want(3, 8) || got.Usage.PromptTokensDetails.CachedTokens != 3 {
		t.Fatalf("got %+v", got)
	}
	stream := c.Completions.NewStreaming(t.Context(), openai.CompletionNewParams{
		Model: "tiny", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Hello")}, MaxTokens: openai.Int(8),
	})
	var text strings.Builder
	for stream.Next() {
		for _, ch := range stream.Current().Choices {
			text.WriteString(ch.Text)
		}
	}
	if stream.Err() != nil || text.String() != want(6, 8) {
		t.Fatalf("streamed %q err %v", text.String(), stream.Err())
	}
	page, err := c.Models.List(t.Context())
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "tiny" {
		t.Fatalf("models %+v err %v", page, err)
	}
}

func TestSDKErrors(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{guard: auth.New(auth.Config{Keys: []string{"sk-test"}})})
	chat := func(key string, p openai.ChatCompletionNewParams) error {
		c := sdkClient(s, key)
		_, err := c.Chat.Completions.New(t.Context(), p)
		return err
	}
	base := openai.ChatCompletionNewParams{Model: "tiny", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}}
	tests := []struct {
		name   string
		key    string
		mutate func(*openai.ChatCompletionNewParams)
		status int
		param  string
	}{
		{name: "bad key", key: "sk-wrong", status: http.StatusUnauthorized},
		{name: "unknown model", key: "sk-test", mutate: func(p *openai.ChatCompletionNewParams) { p.Model = "gpt-9" }, status: http.StatusNotFound, param: "model"},
		{name: "n", key: "sk-test", mutate: func(p *openai.ChatCompletionNewParams) { p.N = openai.Int(9) }, status: http.StatusBadRequest, param: "n"},
		{name: "temperature", key: "sk-test", mutate: func(p *openai.ChatCompletionNewParams) { p.Temperature = openai.Float(9) }, status: http.StatusBadRequest, param: "temperature"},
		{name: "context", key: "sk-test", mutate: func(p *openai.ChatCompletionNewParams) { p.MaxTokens = openai.Int(100000) }, status: http.StatusBadRequest, param: "max_tokens"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := base
			if tc.mutate != nil {
				tc.mutate(&p)
			}
			var apiErr *openai.Error
			if err := chat(tc.key, p); !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || apiErr.Param != tc.param {
				t.Fatalf("got %v, want status %d param %q", err, tc.status, tc.param)
			}
		})
	}
}

// Logprobs read through the SDK's typed fields, as a client sees them.
func TestSDKLogprobs(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w", Batch: 2}}})
	c := sdkClient(s, "unused")
	params := openai.ChatCompletionNewParams{
		Model:     "tiny",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")},
		MaxTokens: openai.Int(12), Logprobs: openai.Bool(true), TopLogprobs: openai.Int(2),
	}
	check := func(t *testing.T, how string, content []openai.ChatCompletionTokenLogprob) {
		t.Helper()
		if len(content) != 12 {
			t.Fatalf("%s: %d entries", how, len(content))
		}
		for k, e := range content {
			p := chatPromptLen + k
			b := upstreamtest.Script[p]
			top := e.TopLogprobs
			if e.Token != string(b) || len(e.Bytes) != 1 || e.Bytes[0] != int64(b) || e.Logprob != float64(upstreamtest.Logprob(p)) ||
				len(top) != 2 || top[0].Token != e.Token || top[0].Logprob != e.Logprob || top[1].Token != "0" || top[1].Logprob != e.Logprob-1 {
				t.Fatalf("%s: entry %d = %+v", how, k, e)
			}
		}
	}
	got, err := c.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	check(t, "whole", got.Choices[0].Logprobs.Content)
	if got.Choices[0].Logprobs.Refusal != nil {
		t.Fatalf("refusal %+v", got.Choices[0].Logprobs.Refusal)
	}

	stream := c.Chat.Completions.NewStreaming(t.Context(), params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatal("the accumulator refused a chunk")
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	check(t, "streamed", acc.Choices[0].Logprobs.Content)
	if acc.Choices[0].Message.Content != got.Choices[0].Message.Content {
		t.Fatalf("streamed %q, whole %q", acc.Choices[0].Message.Content, got.Choices[0].Message.Content)
	}

	// Completions: logprobs=0 decodes as empty top_logprobs maps.
	for _, n := range []int64{0, 3} {
		comp, err := c.Completions.New(t.Context(), openai.CompletionNewParams{
			Model: "tiny", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Hello")}, MaxTokens: openai.Int(5), Logprobs: openai.Int(n),
		})
		if err != nil {
			t.Fatal(err)
		}
		lp := comp.Choices[0].Logprobs
		if len(lp.Tokens) != 5 || len(lp.TokenLogprobs) != 5 || len(lp.TextOffset) != 5 || len(lp.TopLogprobs) != 5 ||
			lp.Tokens[0] != "p" || lp.TokenLogprobs[0] != float64(upstreamtest.Logprob(6)) || lp.TextOffset[4] != 4 {
			t.Fatalf("logprobs=%d: %+v", n, lp)
		}
		for k, m := range lp.TopLogprobs {
			// The sampled token is always listed (alone with logprobs 0).
			if want := float64(upstreamtest.Logprob(6 + k)); len(m) != max(int(n), 1) || m[lp.Tokens[k]] != want || n > 1 && m["0"] != want-1 {
				t.Fatalf("logprobs=%d: top %v", n, lp.TopLogprobs)
			}
		}
	}

	sim := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "sim", NoLogprobs: true}}})
	simClient := sdkClient(sim, "unused")
	_, err = simClient.Chat.Completions.New(t.Context(), params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "logprobs" {
		t.Fatalf("sim worker: %v", err)
	}
}
