package httpapi

import (
	"math"
	"unicode/utf8"

	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/openai"
)

// chatLogprobs converts entries to chat's choices[].logprobs.
func chatLogprobs(lps []generate.Logprob) *openai.ChatLogprobs {
	content := make([]openai.TokenLogprob, len(lps))
	for i, lp := range lps {
		top := make([]openai.TopLogprob, len(lp.Top))
		for j, t := range lp.Top {
			top[j] = openai.TopLogprob{Token: tokenText(t.Bytes), Bytes: byteList(t.Bytes), Logprob: finite(t.Logprob)}
		}
		tok := lp.Token
		content[i] = openai.TokenLogprob{Token: tokenText(tok.Bytes), Bytes: byteList(tok.Bytes), Logprob: finite(tok.Logprob), TopLogprobs: top}
	}
	return &openai.ChatLogprobs{Content: content}
}

// textOffsets gives each token of a completion its text_offset: the
// characters (code points) of the completion before the token's first
// byte. A character is counted at the token where its first byte is, so
// a token that only continues a character split across tokens starts
// after it; a byte that is no UTF-8 counts as one character (its U+FFFD).
type textOffsets struct {
	chars   int    // characters completed so far
	partial []byte // the start of a character that later tokens complete
}

// next returns the offset of the token with bytes piece and moves past it.
// Every character that begins in the held bytes comes before the token;
// held bytes still incomplete count as one (they are the start of a
// character, unless a later byte shows them malformed).
func (o *textOffsets) next(piece []byte) int {
	at, held := o.chars, len(o.partial)
	b := append(o.partial, piece...) //nolint:gocritic // o.partial is replaced by a copy below
	off := 0
	for utf8.FullRune(b[off:]) {
		if off < held {
			at++
		}
		_, size := utf8.DecodeRune(b[off:])
		off += size
		o.chars++
	}
	if off < held {
		at++
	}
	o.partial = append(o.partial[:0:0], b[off:]...)
	return at
}

// completionLogprobs converts entries to a completion's choices[].logprobs.
func (o *textOffsets) completionLogprobs(lps []generate.Logprob) *openai.CompletionLogprobs {
	out := &openai.CompletionLogprobs{
		Tokens:        make([]string, len(lps)),
		TokenLogprobs: make([]float32, len(lps)),
		TopLogprobs:   make([]openai.LogprobMap, len(lps)),
		TextOffset:    make([]int, len(lps)),
	}
	for i, lp := range lps {
		out.Tokens[i] = tokenText(lp.Token.Bytes)
		out.TokenLogprobs[i] = finite(lp.Token.Logprob)
		out.TextOffset[i] = o.next(lp.Token.Bytes)
		top := make(openai.LogprobMap, 0, len(lp.Top)+1)
		for _, t := range lp.Top {
			// Distinct tokens can share a text (a byte fallback and a
			// merged token, or two stray bytes): the first, most likely,
			// stands for them.
			if text := tokenText(t.Bytes); !hasToken(top, text) {
				top = append(top, openai.TokenValue{Token: text, Logprob: finite(t.Logprob)})
			}
		}
		// As OpenAI and vLLM do, the sampled token is listed too when it
		// is not among the most likely (and alone with logprobs 0).
		if !hasToken(top, out.Tokens[i]) {
			top = append(top, openai.TokenValue{Token: out.Tokens[i], Logprob: out.TokenLogprobs[i]})
		}
		out.TopLogprobs[i] = top
	}
	return out
}

func hasToken(m openai.LogprobMap, text string) bool {
	for _, e := range m {
		if e.Token == text {
			return true
		}
	}
	return false
}

// tokenText is b as a string, each byte that is no UTF-8 replaced by
// U+FFFD, as the text of the stream is (tokenizer.ValidUTF8).
func tokenText(b []byte) string { return tokenizer.ValidUTF8(string(b)) }

// byteList is b as JSON numbers; never nil, so no bytes is [].
func byteList(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}

// finite maps what JSON cannot carry (minus infinity, NaN) and anything
// below it to OpenAI's -9999.
func finite(lp float32) float32 {
	if math.IsNaN(float64(lp)) || math.IsInf(float64(lp), 0) || lp < openai.MinLogprob {
		return openai.MinLogprob
	}
	return lp
}
