package openai

import (
	"errors"
	"net/http"
	"testing"
)

var fuzzSeeds = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stop":["x"],"max_tokens":3}`,
	`{"model":"m","prompt":[[1,2]],"stream":true,"stream_options":{"include_usage":true}}`,
	`{"model":"m","prompt":"x","temperature":0.5,"top_p":0.9,"seed":-4,"switchyard":{"priority":1}}`,
	`{"model":"m","prompt":[1,2],"stop_token_ids":[2],"top_k":-1}`,
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":3}`,
	`{"model":"m","prompt":"x","logprobs":5}`,
	`{`, `[]`, `null`, ``,
}

// checkDecoded asserts the decoders' contract: an error is a 400 *Error,
// and a success has every field in range.
func checkDecoded(t *testing.T, g Generation, err error) {
	if err != nil {
		var apiErr *Error
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest {
			t.Fatalf("error is not a 400 *Error: %v", err)
		}
		return
	}
	if g.Model == "" || g.Temperature < 0 || g.Temperature > 2 || g.TopP <= 0 || g.TopP > 1 ||
		g.MaxTokens < 0 || g.MaxTokens > MaxTokensLimit || len(g.Stop) > MaxStop ||
		g.TopLogprobs < 0 || g.TopLogprobs > MaxTopLogprobs || g.TopLogprobs > 0 && !g.Logprobs {
		t.Fatalf("out of range: %+v", g)
	}
	for _, s := range g.Stop {
		if s == "" || len(s) > MaxStopLen {
			t.Fatalf("bad stop %q", s)
		}
	}
}

func FuzzDecodeChat(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, g, err := DecodeChat(data)
		checkDecoded(t, g, err)
		if err == nil && len(r.Messages) == 0 {
			t.Fatal("accepted no messages")
		}
	})
}

func FuzzDecodeCompletion(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, g, err := DecodeCompletion(data)
		checkDecoded(t, g, err)
		if err == nil && len(r.Prompt.Texts)+len(r.Prompt.Tokens) != 1 {
			t.Fatalf("accepted %d prompts", len(r.Prompt.Texts)+len(r.Prompt.Tokens))
		}
	})
}
