package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	"switchyard.dev/libs/mesh/canary"
	"switchyard.dev/services/frontend/internal/catalog"
	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/openai"
)

// readBody reads at most MaxBodyBytes; more is a 413.
func (a *API) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	return body, nil
}

// promptFunc tokenizes the request's prompt for model.
type promptFunc func(m *catalog.Model) ([]uint32, error)

// prepare resolves the model, tokenizes, and fits max_tokens to the
// context the way vLLM does: a prompt that fills the context, or an
// explicit max_tokens that does not fit beside it, is a 400; no max_tokens
// means all that is left.
func (a *API) prepare(ctx context.Context, g openai.Generation, prompt promptFunc) (generate.Request, error) {
	m, err := a.cfg.Catalog.Get(ctx, g.Model)
	if err != nil {
		return generate.Request{}, err
	}
	ids, err := prompt(m)
	if err != nil {
		return generate.Request{}, err
	}
	window := int(m.Info.GetContextLength())
	if !fits(window, len(ids), g.MaxTokens) {
		return generate.Request{}, openai.ContextTooLong(window, len(ids), g)
	}
	maxTokens := g.MaxTokens
	if maxTokens == 0 {
		maxTokens = window - len(ids)
	}
	for _, id := range g.StopTokenIDs {
		if int(id) >= m.Tok.VocabSize() {
			return generate.Request{}, openai.Invalid("stop_token_ids", "Token id %d is not below the vocabulary size %d.", id, m.Tok.VocabSize())
		}
	}
	if err := checkLogitBias(g.LogitBias, m.Tok.VocabSize()); err != nil {
		return generate.Request{}, err
	}
	key := canary.TokensKey(ids)
	if g.Hints.SessionID != "" {
		key = canary.SessionKey(g.Hints.SessionID)
	}
	return generate.Request{
		AffinityKey: key,
		Model:       m.Name, Prompt: ids, Tokenizer: m.Tok, MaxTokens: maxTokens,
		Sampling: &commonv1.SamplingParams{Temperature: g.Temperature, TopP: g.TopP, TopK: g.TopK, Seed: g.Seed,
			Logprobs: g.Logprobs, TopLogprobs: uint32(g.TopLogprobs), Constraint: constraint(g.Format),
			PresencePenalty: g.PresencePenalty, FrequencyPenalty: g.FrequencyPenalty, LogitBias: g.LogitBias},
		Stop:      g.Stop,
		StopIDs:   g.StopTokenIDs,
		IgnoreEOS: g.IgnoreEOS,
		Hints: &commonv1.Hints{Priority: g.Hints.Priority, ExpectedOutputTokens: g.Hints.ExpectedOutputTokens,
			SessionId: g.Hints.SessionID, WorkerId: g.Hints.WorkerID},
	}, nil
}

// textPrompt tokenizes text for m. A text over quickCountBytes whose
// length alone shows that it cannot fit in the context beside the
// completion (catalog.MinTokens) is refused without being encoded:
// encoding megabytes only to refuse them would hold a core for seconds.
// Shorter texts are counted exactly, so their errors give the count.
func textPrompt(text string, m *catalog.Model, g openai.Generation) ([]uint32, error) {
	window := int(m.Info.GetContextLength())
	if len(text) > quickCountBytes {
		if n := m.MinTokens(text); !fits(window, n, g.MaxTokens) {
			return nil, openai.PromptTooLong(window, n, len(text), g)
		}
	}
	return m.Encode(text), nil
}

// fits is prepare's rule: a prompt of n tokens leaves room for at least
// one completion token, and for maxTokens of them when they are asked for.
func fits(window, n, maxTokens int) bool {
	return n < window && (maxTokens == 0 || n+maxTokens <= window)
}

// quickCountBytes of text encode in a few milliseconds (BenchmarkEncodeLong:
// 64 KiB in ~26 ms).
const quickCountBytes = 16 << 10

// tokenPrompt checks a token-id prompt against the vocabulary.
func tokenPrompt(ids []int64, m *catalog.Model) ([]uint32, error) {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		if id >= int64(m.Tok.VocabSize()) {
			return nil, openai.Invalid("prompt", "Token id %d at position %d is not below the vocabulary size %d.", id, i, m.Tok.VocabSize())
		}
		out[i] = uint32(id)
	}
	return out, nil
}

// constraint is f as the workers take it; nil for free text.
func constraint(f openai.Format) *commonv1.OutputConstraint {
	switch {
	case len(f.JSONSchema) > 0:
		return &commonv1.OutputConstraint{Kind: &commonv1.OutputConstraint_JsonSchema{JsonSchema: string(f.JSONSchema)}}
	case f.JSONObject:
		return &commonv1.OutputConstraint{Kind: &commonv1.OutputConstraint_JsonObject{JsonObject: &commonv1.JsonObject{}}}
	}
	return nil
}

// checkLogitBias checks logit_bias's token ids against the vocabulary,
// naming the lowest one out of it (so the message does not depend on the
// map's order).
func checkLogitBias(bias map[uint32]float32, vocab int) error {
	bad, found := uint32(0), false
	for id := range bias {
		if int(id) >= vocab && (!found || id < bad) {
			bad, found = id, true
		}
	}
	if found {
		return openai.Invalid("logit_bias", "logit_bias names token id %d, which is not below the vocabulary size %d.", bad, vocab)
	}
	return nil
}
