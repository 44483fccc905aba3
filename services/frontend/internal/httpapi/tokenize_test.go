package httpapi

import (
	"net/http"
	"strconv"
	"testing"

	"switchyard.dev/services/frontend/internal/openai"
)

// /tokenize gives the ids a completion sends (BOS first), or the chat
// template's rendering of messages; /detokenize turns ids back into the
// text; errors are OpenAI's envelope with the parameter named.
func TestTokenize(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{})
	var tok openai.TokenizeResponse
	resp := s.post(t, "/tokenize", `{"model":"tiny","prompt":"Hi there"}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	decode(t, resp, &tok)
	if tok.Count != 1+len("Hi there") || len(tok.Tokens) != tok.Count || tok.MaxModelLen <= 0 {
		t.Fatalf("tokenize: %+v", tok)
	}
	var bare openai.TokenizeResponse
	decode(t, s.post(t, "/tokenize", `{"model":"tiny","prompt":"Hi there","add_special_tokens":false}`), &bare)
	if bare.Count != tok.Count-1 || bare.Tokens[0] != tok.Tokens[1] {
		t.Errorf("without special tokens: %+v, want %v without its BOS", bare, tok.Tokens)
	}
	var chat openai.TokenizeResponse
	decode(t, s.post(t, "/tokenize", `{"model":"tiny","messages":[{"role":"user","content":"Hi"}]}`), &chat)
	if chat.Count != chatPromptLen {
		t.Errorf("chat messages: %d tokens, want the chat prompt's %d", chat.Count, chatPromptLen)
	}
	ids := "["
	for i, id := range tok.Tokens {
		if i > 0 {
			ids += ","
		}
		ids += strconv.Itoa(int(id))
	}
	var de openai.DetokenizeResponse
	decode(t, s.post(t, "/detokenize", `{"model":"tiny","tokens":`+ids+`]}`), &de)
	if de.Prompt != "Hi there" {
		t.Errorf("detokenize: %q, want %q", de.Prompt, "Hi there")
	}
	for _, tc := range []struct {
		name, path, body string
		status           int
		param            string
	}{
		{"unknown model", "/tokenize", `{"model":"nope","prompt":"a"}`, http.StatusNotFound, "model"},
		{"both prompt and messages", "/tokenize", `{"model":"tiny","prompt":"a","messages":[{"role":"user","content":"b"}]}`, http.StatusBadRequest, "prompt"},
		{"neither", "/tokenize", `{"model":"tiny"}`, http.StatusBadRequest, "prompt"},
		{"unknown field", "/tokenize", `{"model":"tiny","prompt":"a","frobnicate":1}`, http.StatusBadRequest, "frobnicate"},
		{"id past the vocabulary", "/detokenize", `{"model":"tiny","tokens":[1,99999999]}`, http.StatusBadRequest, "tokens"},
		{"negative id", "/detokenize", `{"model":"tiny","tokens":[-1]}`, http.StatusBadRequest, "tokens"},
	} {
		resp := s.post(t, tc.path, tc.body)
		var e openai.ErrorBody
		decode(t, resp, &e)
		if resp.StatusCode != tc.status || e.Error.Param == nil || *e.Error.Param != tc.param {
			t.Errorf("%s: status %d, error %+v; want %d on %q", tc.name, resp.StatusCode, e.Error, tc.status, tc.param)
		}
	}
}
