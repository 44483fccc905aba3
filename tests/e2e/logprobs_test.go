package e2e

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/openai/openai-go/v3"
)

// A real llama worker (the built-in tiny random model) returns logprobs
// through the frontend: each at most 0, and with greedy decoding the
// sampled token is the first of its top_logprobs, with the same logprob.
// A sim worker has no logits: the request is a 400 on param logprobs.
func TestLogprobsAgainstMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped under -short")
	}
	m := StartMesh(t, 1, "round-robin", "-executor", "llama")
	c := client(m)
	id := waitModel(t, c)
	params := openai.ChatCompletionNewParams{
		Model:     id,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me a story.")},
		MaxTokens: openai.Int(16), Temperature: openai.Float(0),
		Logprobs: openai.Bool(true), TopLogprobs: openai.Int(5),
	}
	chat, err := c.Chat.Completions.New(t.Context(), params)
	if err != nil {
		t.Fatal(err)
	}
	content := chat.Choices[0].Logprobs.Content
	if int64(len(content)) != chat.Usage.CompletionTokens {
		t.Fatalf("%d logprob entries for %d tokens", len(content), chat.Usage.CompletionTokens)
	}
	for k, e := range content {
		top := e.TopLogprobs
		if e.Logprob > 0 || len(top) != 5 {
			t.Fatalf("entry %d: logprob %v, %d alternatives", k, e.Logprob, len(top))
		}
		for j := range top {
			if top[j].Logprob > 0 || j > 0 && top[j].Logprob > top[j-1].Logprob {
				t.Fatalf("entry %d: top_logprobs not at most 0 and most likely first: %+v", k, top)
			}
		}
		if top[0].Logprob != e.Logprob || top[0].Token != e.Token || !slices.Equal(top[0].Bytes, e.Bytes) {
			t.Fatalf("entry %d: greedy token %q (%v) is not the first of %+v", k, e.Token, e.Logprob, top)
		}
	}
	t.Logf("%d tokens; the first %q at %v, the runner-up at %v", len(content), content[0].Token, content[0].Logprob, content[0].TopLogprobs[1].Logprob)

	// Streamed, the same greedy entries arrive.
	stream := c.Chat.Completions.NewStreaming(t.Context(), params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	streamed := acc.Choices[0].Logprobs.Content
	if len(streamed) != len(content) {
		t.Fatalf("streamed %d entries, whole %d", len(streamed), len(content))
	}
	for k := range streamed {
		if streamed[k].Token != content[k].Token || streamed[k].Logprob != content[k].Logprob {
			t.Fatalf("streamed entry %d %+v != whole %+v", k, streamed[k], content[k])
		}
	}

	comp, err := c.Completions.New(t.Context(), openai.CompletionNewParams{
		Model:     openai.CompletionNewParamsModel(id),
		Prompt:    openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")},
		MaxTokens: openai.Int(8), Temperature: openai.Float(0), Logprobs: openai.Int(2),
	})
	if err != nil {
		t.Fatal(err)
	}
	lp := comp.Choices[0].Logprobs
	if len(lp.Tokens) != 8 || len(lp.TokenLogprobs) != 8 || len(lp.TopLogprobs) != 8 || len(lp.TextOffset) != 8 {
		t.Fatalf("completion logprobs %+v", lp)
	}
	for k, tok := range lp.Tokens {
		if got, ok := lp.TopLogprobs[k][tok]; !ok || got != lp.TokenLogprobs[k] || got > 0 {
			t.Fatalf("token %d %q (%v): not the most likely of %v", k, tok, lp.TokenLogprobs[k], lp.TopLogprobs[k])
		}
	}

	sim := StartMesh(t, 1, "round-robin", "-executor", "sim")
	sc := client(sim)
	params.Model = waitModel(t, sc)
	_, err = sc.Chat.Completions.New(t.Context(), params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "logprobs" {
		t.Fatalf("sim worker with logprobs: err = %v; want a 400 on param logprobs", err)
	}
	params.Logprobs, params.TopLogprobs = openai.Bool(false), openai.Int(0)
	if _, err := sc.Chat.Completions.New(t.Context(), params); err != nil {
		t.Fatalf("sim worker without logprobs: %v", err)
	}
}
