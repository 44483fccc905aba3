package openai

// MaxDetokenizeTokens bounds a /detokenize request.
const MaxDetokenizeTokens = 1 << 20

// TokenizeRequest is POST /tokenize, in vLLM's shape: a prompt, or chat
// messages rendered with the model's chat template.
type TokenizeRequest struct {
	Model  string  `json:"model"`
	Prompt *string `json:"prompt,omitempty"`
	// Messages, instead of Prompt, are rendered with the model's chat
	// template first, as a chat completion would be.
	Messages []ChatMessage `json:"messages,omitempty"`
	// AddSpecialTokens puts the model's BOS first (default true), as a
	// completion does.
	AddSpecialTokens *bool `json:"add_special_tokens,omitempty"`
	// AddGenerationPrompt is accepted for vLLM's clients; the templates
	// here always end with the assistant's turn.
	AddGenerationPrompt *bool `json:"add_generation_prompt,omitempty"`
}

// TokenizeResponse is the prompt's token ids, as the model's workers see
// them.
type TokenizeResponse struct {
	Count       int      `json:"count"`
	MaxModelLen int      `json:"max_model_len"`
	Tokens      []uint32 `json:"tokens"`
}

// DetokenizeRequest is POST /detokenize.
type DetokenizeRequest struct {
	Model  string  `json:"model"`
	Tokens []int64 `json:"tokens"`
}

// DetokenizeResponse is the text of the tokens.
type DetokenizeResponse struct {
	Prompt string `json:"prompt"`
}

// DecodeTokenize decodes and checks a /tokenize request strictly.
func DecodeTokenize(data []byte) (*TokenizeRequest, error) {
	var req TokenizeRequest
	if err := unmarshal(data, &req); err != nil {
		return nil, err
	}
	switch {
	case req.Model == "":
		return nil, Invalid("model", "The model parameter is required.")
	case (req.Prompt == nil) == (len(req.Messages) == 0):
		return nil, Invalid("prompt", "Give exactly one of prompt and messages.")
	}
	if len(req.Messages) > 0 {
		if err := checkMessages(req.Messages); err != nil {
			return nil, err
		}
	}
	return &req, nil
}

// DecodeDetokenize decodes and checks a /detokenize request strictly;
// the ids are checked against the vocabulary once the model is known.
func DecodeDetokenize(data []byte) (*DetokenizeRequest, error) {
	var req DetokenizeRequest
	if err := unmarshal(data, &req); err != nil {
		return nil, err
	}
	switch {
	case req.Model == "":
		return nil, Invalid("model", "The model parameter is required.")
	case len(req.Tokens) > MaxDetokenizeTokens:
		return nil, Invalid("tokens", "At most %d tokens, got %d.", MaxDetokenizeTokens, len(req.Tokens))
	}
	for i, t := range req.Tokens {
		if t < 0 {
			return nil, Invalid("tokens", "Token id %d at position %d is negative.", t, i)
		}
	}
	return &req, nil
}
