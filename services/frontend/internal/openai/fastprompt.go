package openai

import (
	"bytes"
)

// Token-id prompts are the large requests: a replayed trace sends 100k ids
// (~650 KB of JSON). encoding/json reads such a body three times (it
// validates the whole input, skips the prompt's value to find its end,
// then hands it to Prompt.UnmarshalJSON), which cost ~6 ms of CPU per 100k
// ids, after the ids themselves had cost ~60 ms through reflection. So a
// completion body first gets one pass here: it finds the top-level
// "prompt" member, parses an array of integer ids (or an array of one such
// array) with tokenIDs, and gives encoding/json the rest of the body with
// the prompt's value replaced by null. Anything unusual (another shape of
// prompt, a key spelled with escapes or in another case, which
// encoding/json would also match, a duplicate key, malformed JSON) makes
// it step aside, and the whole body goes through encoding/json as before,
// which gives the errors.

// splitTokenPrompt returns body with its top-level "prompt" value replaced
// by null, and that value's token ids; !ok when it does not apply.
func splitTokenPrompt(body []byte) (rest []byte, ids []int64, ok bool) {
	i := skipSpace(body, 0)
	if i == len(body) || body[i] != '{' {
		return nil, nil, false
	}
	i = skipSpace(body, i+1)
	start, end := -1, -1
	for first := true; ; first = false {
		if i < len(body) && body[i] == '}' && first {
			break
		}
		k0, k1, ok := stringSpan(body, i)
		if !ok {
			return nil, nil, false
		}
		key := body[k0+1 : k1-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			return nil, nil, false
		}
		i = skipSpace(body, k1)
		if i == len(body) || body[i] != ':' {
			return nil, nil, false
		}
		i = skipSpace(body, i+1)
		switch {
		case string(key) == "prompt":
			if start >= 0 { // a second one: encoding/json would take the last
				return nil, nil, false
			}
			var v []int64
			var j int
			if v, j, ok = promptIDs(body, i); !ok {
				return nil, nil, false
			}
			ids, start, end, i = v, i, j, j
		case bytes.EqualFold(key, []byte("prompt")):
			return nil, nil, false
		default:
			if i, ok = skipValue(body, i); !ok {
				return nil, nil, false
			}
		}
		i = skipSpace(body, i)
		if i == len(body) {
			return nil, nil, false
		}
		if body[i] == '}' {
			break
		}
		if body[i] != ',' {
			return nil, nil, false
		}
		i = skipSpace(body, i+1)
	}
	if start < 0 || len(bytes.TrimSpace(body[i+1:])) != 0 {
		return nil, nil, false
	}
	rest = make([]byte, 0, len(body)-(end-start)+4)
	rest = append(rest, body[:start]...)
	rest = append(rest, "null"...)
	rest = append(rest, body[end:]...)
	return rest, ids, true
}

// promptIDs parses a token-id prompt value at body[i:]: [ids] or [[ids]].
func promptIDs(body []byte, i int) ([]int64, int, bool) {
	if i == len(body) || body[i] != '[' {
		return nil, 0, false
	}
	if j := skipSpace(body, i+1); j < len(body) && body[j] == '[' {
		ids, rest, ok := tokenIDs(body[j:])
		if !ok {
			return nil, 0, false
		}
		k := skipSpace(body, len(body)-len(rest))
		if k == len(body) || body[k] != ']' {
			return nil, 0, false
		}
		return ids, k + 1, true
	}
	ids, rest, ok := tokenIDs(body[i:])
	if !ok || len(ids) == 0 { // [] is an empty text list for Prompt
		return nil, 0, false
	}
	return ids, len(body) - len(rest), true
}

// stringSpan returns the span [i, end) of the JSON string at body[i].
func stringSpan(body []byte, i int) (int, int, bool) {
	if i == len(body) || body[i] != '"' {
		return 0, 0, false
	}
	for j := i + 1; j < len(body); j++ {
		switch body[j] {
		case '\\':
			j++
		case '"':
			return i, j + 1, true
		}
	}
	return 0, 0, false
}

// skipValue returns the index after the JSON value at body[i], without
// validating it (encoding/json validates what is not the prompt). It looks
// at each byte once: a string to its closing quote, an object or array to
// its matching bracket, anything else up to the first delimiter.
func skipValue(body []byte, i int) (int, bool) {
	if i == len(body) {
		return 0, false
	}
	switch body[i] {
	case '"':
		_, end, ok := stringSpan(body, i)
		return end, ok
	case '{', '[':
		depth := 0
		for i < len(body) {
			switch body[i] {
			case '"':
				_, end, ok := stringSpan(body, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	}
	for ; i < len(body); i++ {
		switch body[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i, true
		}
	}
	return 0, false
}

// decodeCompletionBody decodes a completion request, taking a token-id
// prompt by splitTokenPrompt when it applies. Any error comes from the
// whole body through unmarshal, so messages and offsets are the same as
// without the split.
func decodeCompletionBody(data []byte, req *CompletionRequest) error {
	if rest, ids, ok := splitTokenPrompt(data); ok {
		if err := decodeStrict(rest, req); err == nil {
			req.Prompt = Prompt{Tokens: [][]int64{ids}}
			return nil
		}
		*req = CompletionRequest{}
	}
	return unmarshal(data, req)
}
