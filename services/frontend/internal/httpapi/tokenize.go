package httpapi

import (
	"net/http"
	"strings"

	"switchyard.dev/services/frontend/internal/openai"
)

// tokenize serves POST /tokenize with the model's own tokenizer (and chat
// template), so a client sees exactly the ids a completion would send.
func (a *API) tokenize(w http.ResponseWriter, r *http.Request) {
	body, err := a.readBody(w, r)
	if err != nil {
		a.fail(w, r, err, "")
		return
	}
	req, err := openai.DecodeTokenize(body)
	if err != nil {
		a.fail(w, r, err, "")
		return
	}
	m, err := a.cfg.Catalog.Get(r.Context(), req.Model)
	if err != nil {
		a.fail(w, r, err, req.Model)
		return
	}
	var text string
	if req.Prompt != nil {
		text = *req.Prompt
	} else if text, err = renderChat(a.cfg.Templates.ForModel(m.Name, m.Template), chatMessages(req.Messages)); err != nil {
		a.fail(w, r, err, req.Model)
		return
	}
	ids := m.Encode(text)
	if req.AddSpecialTokens != nil && !*req.AddSpecialTokens && len(ids) > 0 && ids[0] == m.Info.GetBosTokenId() {
		ids = ids[1:]
	}
	writeJSON(w, http.StatusOK, openai.TokenizeResponse{Count: len(ids), MaxModelLen: int(m.Info.GetContextLength()), Tokens: ids})
}

// detokenize serves POST /detokenize: the text the tokens decode to, as
// the workers decode generated tokens.
func (a *API) detokenize(w http.ResponseWriter, r *http.Request) {
	body, err := a.readBody(w, r)
	if err != nil {
		a.fail(w, r, err, "")
		return
	}
	req, err := openai.DecodeDetokenize(body)
	if err != nil {
		a.fail(w, r, err, "")
		return
	}
	m, err := a.cfg.Catalog.Get(r.Context(), req.Model)
	if err != nil {
		a.fail(w, r, err, req.Model)
		return
	}
	var b strings.Builder
	prev := m.Tok.BOS()
	for i, t := range req.Tokens {
		if t >= int64(m.Tok.VocabSize()) {
			a.fail(w, r, openai.Invalid("tokens", "Token id %d at position %d is not below the vocabulary size %d.", t, i, m.Tok.VocabSize()), req.Model)
			return
		}
		b.Write(m.Tok.Piece(prev, uint32(t)))
		prev = uint32(t)
	}
	writeJSON(w, http.StatusOK, openai.DetokenizeResponse{Prompt: b.String()})
}
