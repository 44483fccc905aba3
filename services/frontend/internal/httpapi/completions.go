package httpapi

import (
	"net/http"

	"switchyard.dev/libs/engine/tokenizer"
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
	f := &completionFormat{}
	if g.Echo {
		f.echo = echoText(req.Prompt, gen)
	}
	c := call{id: newID("cmpl-"), created: a.cfg.Now().Unix()}
	a.serve(w, r, epCompletions, g, gen, c, f)
}

// echoText is the prompt as echo returns it: a text prompt as sent, a
// token-id prompt decoded as the workers decode output.
func echoText(p openai.Prompt, gen generate.Request) string {
	if len(p.Texts) == 1 {
		return p.Texts[0]
	}
	return string(tokenizer.Decode(gen.Tokenizer, gen.Tokenizer.BOS(), gen.Prompt))
}

// completionFormat builds text_completion bodies; chunks have the same
// shape as the whole response. It counts the text_offset of a stream's
// tokens across chunks, so it serves one choice of one response.
type completionFormat struct {
	offsets textOffsets
	// echo is the prompt text, sent before the completion's (echo=true).
	echo string
}

func (f *completionFormat) fork() format { return &completionFormat{echo: f.echo} }

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

// start is the echoed prompt, if any: the stream's first chunk.
func (f *completionFormat) start(c call) any {
	if f.echo == "" {
		return nil
	}
	return f.body(c, f.echo, nil, nil, nil)
}

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
	return f.body(c, f.echo+text, &reason, lp, &u)
}
