package vllm

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// completionsBody is vLLM's /v1/completions request.
type completionsBody struct {
	Model                  string         `json:"model"`
	Prompt                 []uint32       `json:"prompt"`
	MaxTokens              int            `json:"max_tokens"`
	MinTokens              int            `json:"min_tokens,omitempty"`
	Temperature            float64        `json:"temperature"`
	TopP                   float64        `json:"top_p"`
	TopK                   int            `json:"top_k"`
	Seed                   *uint64        `json:"seed,omitempty"`
	StopTokenIDs           []uint32       `json:"stop_token_ids,omitempty"`
	IgnoreEOS              bool           `json:"ignore_eos,omitempty"`
	Stream                 bool           `json:"stream"`
	StreamOptions          map[string]any `json:"stream_options"`
	Logprobs               int            `json:"logprobs"`
	ReturnTokensAsTokenIDs bool           `json:"return_tokens_as_token_ids"`
}

func (c *Client) completionsBody(r *Request) *completionsBody {
	b := &completionsBody{
		Model: c.cfg.Model, Prompt: r.Prompt, MaxTokens: r.MaxTokens, MinTokens: r.MinTokens,
		Temperature: r.Temperature, TopP: r.topP(), TopK: r.topK(), StopTokenIDs: r.StopTokenIDs, IgnoreEOS: r.IgnoreEOS,
		Stream: true, StreamOptions: map[string]any{"include_usage": true},
		// logprobs 0: the sampled token's entry only, which is where
		// return_tokens_as_token_ids puts its id.
		Logprobs: 0, ReturnTokensAsTokenIDs: true,
	}
	if r.HasSeed {
		seed := r.Seed
		b.Seed = &seed
	}
	return b
}

// completionsChunk is one streamed /v1/completions event.
type completionsChunk struct {
	Choices []struct {
		Text     string   `json:"text"`
		TokenIDs []uint32 `json:"token_ids"` // newer vLLM with return_token_ids
		Logprobs *struct {
			Tokens []string `json:"tokens"`
		} `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens *int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

// tokenIDPrefix is how return_tokens_as_token_ids spells a token.
const tokenIDPrefix = "token_id:"

func (s *Stream) decodeVLLM(data []byte, c *Chunk) error {
	if err := streamError(data); err != nil {
		return err
	}
	var ch completionsChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return fmt.Errorf("vllm: completions chunk: %w", err)
	}
	if u := ch.Usage; u != nil {
		s.usage, s.hasUse = Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}, true
		if d := u.PromptTokensDetails; d != nil && d.CachedTokens != nil {
			s.usage.CachedTokens, s.usage.HasCachedTokens = *d.CachedTokens, true
		}
	}
	for _, choice := range ch.Choices {
		switch {
		case len(choice.TokenIDs) > 0:
			s.tokens = append(s.tokens, choice.TokenIDs...)
		case choice.Logprobs != nil:
			for _, tok := range choice.Logprobs.Tokens {
				id, err := parseTokenID(tok)
				if err != nil {
					return err
				}
				s.tokens = append(s.tokens, id)
			}
		case choice.Text != "":
			return fmt.Errorf("vllm: completions chunk has text %q but no token ids (does this vLLM support return_tokens_as_token_ids?)", choice.Text)
		}
		if choice.FinishReason != nil {
			c.FinishReason = *choice.FinishReason
		}
	}
	c.Tokens = s.tokens
	return nil
}

func parseTokenID(tok string) (uint32, error) {
	rest, ok := strings.CutPrefix(tok, tokenIDPrefix)
	if ok {
		if id, err := strconv.ParseUint(rest, 10, 32); err == nil {
			return uint32(id), nil
		}
	}
	return 0, fmt.Errorf("vllm: logprobs token %q is not %sN (was return_tokens_as_token_ids honoured?)", tok, tokenIDPrefix)
}
