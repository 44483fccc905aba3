package httpapi

import (
	"net/http"

	"switchyard.dev/services/frontend/internal/catalog"
	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/openai"
)

func (a *API) completions(w http.ResponseWriter, r *http.Request) {
	body, err := a.readBody(w, r)
	if err != nil {
		a.fail(w, r, err, "")
		return
	}
	req, g, err := openai.DecodeCompletion(body)
	if err != nil {
		a.fail(w, r, err, "")
		return
	}
	gen, err := a.prepare(r.Context(), g, func(m *catalog.Model) ([]uint32, error) {
		if len(req.Prompt.Tokens) == 1 {
			return tokenPrompt(req.Prompt.Tokens[0], m)
		}
		return textPrompt(req.Prompt.Texts[0], m, g)
	})
	if err != nil {
		a.fail(w, r, err, g.Model)
		return
	}
	c := call{id: newID("cmpl-"), created: a.cfg.Now().Unix()}
	a.serve(w, r, epCompletions, g, gen, c, &completionFormat{})
}

// completionFormat builds text_completion bodies; chunks have the same
// shape as the whole response. It counts the text_offset of a stream's
// tokens across chunks, so it serves one response.
type completionFormat struct{ offsets textOffsets }

func (f *completionFormat) body(c call, text string, reason *string, lp *openai.CompletionLogprobs, u *openai.Usage) openai.Completion {
	choices := []openai.CompletionChoice{{Text: text, FinishReason: reason, Logprobs: lp}}
	if u != nil && reason == nil {
		choices = []openai.CompletionChoice{}
	}
	return openai.Completion{ID: c.id, Object: openai.ObjectTextCompletion, Created: c.created, Model: c.model, Choices: choices, Usage: u}
}

// chunkLogprobs are a chunk's entries; null when it has none.
func (f *completionFormat) chunkLogprobs(lps []generate.Logprob) *openai.CompletionLogprobs {
	if len(lps) == 0 {
		return nil
	}
	return f.offsets.completionLogprobs(lps)
}

func (*completionFormat) start(call) any { return nil }

func (f *completionFormat) delta(c call, text string, lps []generate.Logprob) any {
	return f.body(c, text, nil, f.chunkLogprobs(lps), nil)
}

func (f *completionFormat) finish(c call, reason string, lps []generate.Logprob) any {
	return f.body(c, "", &reason, f.chunkLogprobs(lps), nil)
}

func (f *completionFormat) usage(c call, u openai.Usage) any { return f.body(c, "", nil, nil, &u) }

func (f *completionFormat) whole(c call, text, reason string, lps []generate.Logprob, u openai.Usage) any {
	var lp *openai.CompletionLogprobs
	if c.logprobs {
		lp = f.offsets.completionLogprobs(lps)
	}
	return f.body(c, text, &reason, lp, &u)
}
