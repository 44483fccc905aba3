package openai

import (
	"bytes"
	"encoding/json"
	"errors"
)

// MinLogprob stands for minus infinity, as OpenAI does, since JSON has no
// infinities. Log probabilities are natural logs of a token's probability
// under the model's own distribution (the softmax of the raw logits, before
// temperature, top_k and top_p, as vLLM returns them).
const MinLogprob = -9999

// ChatLogprobs is choices[].logprobs of a chat completion or chunk, when
// the request set logprobs (null otherwise).
type ChatLogprobs struct {
	// Content has one entry per output token, in order; in a stream, each
	// chunk has the entries of its tokens.
	Content []TokenLogprob `json:"content"`
	// Refusal is always null: no refusals are generated.
	Refusal []TokenLogprob `json:"refusal"`
}

// TokenLogprob is one output token of a chat completion.
type TokenLogprob struct {
	// Token is Bytes as a string (bytes that are not UTF-8 become U+FFFD).
	Token string `json:"token"`
	// Bytes are the bytes the token adds to the text at its position.
	Bytes []int `json:"bytes"`
	// Logprob is the token's log probability.
	Logprob float32 `json:"logprob"`
	// TopLogprobs are the top_logprobs most likely tokens at this
	// position, most likely first.
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is one of the most likely tokens at a position.
type TopLogprob struct {
	Token   string  `json:"token"`
	Bytes   []int   `json:"bytes"`
	Logprob float32 `json:"logprob"`
}

// CompletionLogprobs is choices[].logprobs of a completion or chunk, when
// the request set logprobs (null otherwise): parallel lists with one entry
// per output token.
type CompletionLogprobs struct {
	// Tokens are the tokens' texts (bytes that are not UTF-8 become
	// U+FFFD).
	Tokens []string `json:"tokens"`
	// TokenLogprobs are the tokens' log probabilities.
	TokenLogprobs []float32 `json:"token_logprobs"`
	// TopLogprobs map the logprobs most likely tokens at each position to
	// their log probabilities, then the sampled token when it is not among
	// them (alone with logprobs=0).
	TopLogprobs []LogprobMap `json:"top_logprobs"`
	// TextOffset is where each token starts in the completion text, in
	// characters (code points) from the start of the whole completion,
	// also in a stream's chunks.
	TextOffset []int `json:"text_offset"`
}

// LogprobMap is a JSON object from token text to log probability, written
// most likely first. Tokens are unique.
type LogprobMap []TokenValue

// TokenValue is one member of a LogprobMap.
type TokenValue struct {
	Token   string
	Logprob float32
}

// MarshalJSON writes the object in order; nil is {}.
func (m LogprobMap) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, e := range m {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(e.Token)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(e.Logprob)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads an object, keeping its order; null is nil.
func (m *LogprobMap) UnmarshalJSON(data []byte) error {
	*m = nil
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return errors.New("openai: top_logprobs entry is not an object")
	}
	out := LogprobMap{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		var e TokenValue
		e.Token, _ = t.(string)
		if err := dec.Decode(&e.Logprob); err != nil {
			return err
		}
		out = append(out, e)
	}
	*m = out
	return nil
}

// JSONSchema describes the object for the OpenAPI document.
func (LogprobMap) JSONSchema() map[string]any {
	return map[string]any{"type": "object", "additionalProperties": map[string]any{"type": "number"}}
}
