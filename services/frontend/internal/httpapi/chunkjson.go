package httpapi

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"switchyard.dev/services/frontend/internal/openai"
)

// A stream sends one chunk per delta, nearly all of one shape: a single
// choice with text and no logprobs. appendChunk writes that shape
// straight into the stream's buffer, byte for byte what json.Marshal
// writes (TestAppendChunkMatchesMarshal, FuzzAppendChunk), without the
// reflection and the allocation of a fresh slice per chunk; any other
// body goes through json.Marshal.

// appendChunk appends v's JSON encoding to dst.
func appendChunk(dst []byte, v any) ([]byte, error) {
	switch c := v.(type) {
	case openai.ChatChunk:
		if c.Usage == nil && len(c.Choices) == 1 && c.Choices[0].Logprobs == nil && len(c.Choices[0].Delta.ToolCalls) == 0 {
			return appendChatChunk(dst, &c), nil
		}
	case openai.Completion:
		if c.Usage == nil && len(c.Choices) == 1 && c.Choices[0].Logprobs == nil {
			return appendCompletionChunk(dst, &c), nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

func appendHead(dst []byte, id, object string, created int64, model string) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, id)
	dst = append(dst, `,"object":`...)
	dst = appendJSONString(dst, object)
	dst = append(dst, `,"created":`...)
	dst = strconv.AppendInt(dst, created, 10)
	dst = append(dst, `,"model":`...)
	dst = appendJSONString(dst, model)
	return append(dst, `,"choices":[{"index":`...)
}

func appendTail(dst []byte, finish *string) []byte {
	dst = append(dst, `,"finish_reason":`...)
	if finish == nil {
		dst = append(dst, "null"...)
	} else {
		dst = appendJSONString(dst, *finish)
	}
	return append(dst, `,"logprobs":null}]}`...)
}

func appendChatChunk(dst []byte, c *openai.ChatChunk) []byte {
	ch := &c.Choices[0]
	dst = appendHead(dst, c.ID, c.Object, c.Created, c.Model)
	dst = strconv.AppendInt(dst, int64(ch.Index), 10)
	dst = append(dst, `,"delta":{`...)
	sep := false
	if ch.Delta.Role != "" {
		dst = append(dst, `"role":`...)
		dst = appendJSONString(dst, ch.Delta.Role)
		sep = true
	}
	if ch.Delta.Content != nil {
		if sep {
			dst = append(dst, ',')
		}
		dst = append(dst, `"content":`...)
		dst = appendJSONString(dst, *ch.Delta.Content)
	}
	dst = append(dst, '}')
	return appendTail(dst, ch.FinishReason)
}

func appendCompletionChunk(dst []byte, c *openai.Completion) []byte {
	ch := &c.Choices[0]
	dst = appendHead(dst, c.ID, c.Object, c.Created, c.Model)
	dst = strconv.AppendInt(dst, int64(ch.Index), 10)
	dst = append(dst, `,"text":`...)
	dst = appendJSONString(dst, ch.Text)
	return appendTail(dst, ch.FinishReason)
}

// appendJSONString appends s quoted as encoding/json quotes a string:
// HTML-safe (<, > and & as \u003c, \u003e, \u0026), control characters
// as \b \f \n \r \t or \u00XX, invalid UTF-8 as \ufffd, and U+2028 and
// U+2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
