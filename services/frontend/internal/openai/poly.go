package openai

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
)

// The OpenAI API has fields of more than one JSON type. Each is a Go type
// here with its own UnmarshalJSON, and a JSONSchema method so the generated
// OpenAPI document states the alternatives.

// Content is a message content: a string or an array of parts of which
// only {"type":"text","text":...} is supported.
type Content struct {
	Text string
	// Set reports whether the field was present and not null.
	Set bool
	// BadPart is the index of the first unsupported part type, or -1.
	BadPart int
	// BadType is that part's type.
	BadType string
}

// ContentPart is one element of an array content.
type ContentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *Content) UnmarshalJSON(data []byte) error {
	*c = Content{BadPart: -1}
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		return nil
	}
	if len(data) > 0 && data[0] == '"' {
		c.Set = true
		return json.Unmarshal(data, &c.Text)
	}
	var parts []ContentPart
	if err := json.Unmarshal(data, &parts); err != nil {
		return err
	}
	c.Set = true
	var b strings.Builder
	for i, p := range parts {
		if p.Type != "text" {
			if c.BadPart < 0 {
				c.BadPart, c.BadType = i, p.Type
			}
			continue
		}
		b.WriteString(p.Text)
	}
	c.Text = b.String()
	return nil
}

// MarshalJSON encodes the content as a string.
func (c Content) MarshalJSON() ([]byte, error) { return json.Marshal(c.Text) }

// JSONSchema describes the alternatives for the OpenAPI document.
func (Content) JSONSchema() map[string]any {
	return map[string]any{"oneOf": []any{
		map[string]any{"type": "string"},
		map[string]any{"type": "array", "items": map[string]any{
			"type": "object", "required": []string{"type", "text"},
			"properties": map[string]any{"type": map[string]any{"type": "string", "enum": []string{"text"}}, "text": map[string]any{"type": "string"}},
		}},
	}}
}

// Stop is a stop string or a list of them.
type Stop []string

// UnmarshalJSON implements json.Unmarshaler.
func (s *Stop) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if string(data) == "null" {
		*s = nil
		return nil
	}
	if len(data) > 0 && data[0] == '"' {
		var one string
		if err := json.Unmarshal(data, &one); err != nil {
			return err
		}
		*s = Stop{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(data, &many); err != nil {
		return err
	}
	*s = many
	return nil
}

// JSONSchema describes the alternatives for the OpenAPI document.
func (Stop) JSONSchema() map[string]any {
	return map[string]any{"oneOf": []any{
		map[string]any{"type": "string"},
		map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "maxItems": MaxStop},
	}}
}

// Prompt is a completion prompt: text or token ids, one or many.
type Prompt struct {
	// Texts holds string prompts; Tokens holds token-id prompts. Exactly
	// one is non-nil after a successful decode of a non-null value.
	Texts  []string
	Tokens [][]int64
}

// UnmarshalJSON implements json.Unmarshaler. Token-id prompts take a
// direct scan (promptIDs, as the body's split does): they are the large ones (100k ids are ~650 KB of
// JSON), and encoding/json spent ~50 ms of CPU on one through reflection.
// Anything the scan does not take goes through encoding/json, which gives
// the errors.
func (p *Prompt) UnmarshalJSON(data []byte) error {
	*p = Prompt{}
	data = bytes.TrimSpace(data)
	switch {
	case string(data) == "null":
		return nil
	case len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		p.Texts = []string{s}
		return nil
	}
	if len(data) == 0 || data[0] != '[' {
		var raw []json.RawMessage // not an array: encoding/json's type error, as before
		return json.Unmarshal(data, &raw)
	}
	first := bytes.TrimLeft(data[1:], " \t\r\n")
	switch {
	case len(first) > 0 && first[0] == ']':
		p.Texts = []string{}
		return nil
	case len(first) > 0 && first[0] == '"':
		return json.Unmarshal(data, &p.Texts)
	}
	if ids, end, ok := promptIDs(data, 0); ok && end == len(data) {
		p.Tokens = [][]int64{ids}
		return nil
	}
	if len(first) > 0 && first[0] == '[' {
		return json.Unmarshal(data, &p.Tokens)
	}
	var ids []int64
	if err := json.Unmarshal(data, &ids); err != nil {
		return err
	}
	p.Tokens = [][]int64{ids}
	return nil
}

// tokenIDs scans a JSON array of integers at the start of data (after
// optional whitespace) and returns them with the bytes after the array. It
// takes only what encoding/json would decode into []int64 with the same
// values: integers without fraction or exponent, no leading zeros, in
// int64 range. Anything else reports !ok, and the caller lets encoding/json
// decode (and reject) it.
func tokenIDs(data []byte) (ids []int64, rest []byte, ok bool) {
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '[' {
		return nil, nil, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return []int64{}, data[i+1:], true
	}
	// A flat array of integers ends at the first ']': size the slice once
	// by its commas (not the whole body's, which a long string elsewhere
	// could fill with commas to make this allocate 8 bytes for each).
	end := bytes.IndexByte(data[i:], ']')
	if end < 0 {
		return nil, nil, false
	}
	ids = make([]int64, 0, bytes.Count(data[i:i+end], []byte{','})+1)
	for {
		v, j, ok := jsonInt(data, i)
		if !ok {
			return nil, nil, false
		}
		ids = append(ids, v)
		i = skipSpace(data, j)
		if i == len(data) {
			return nil, nil, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			return ids, data[i+1:], true
		default:
			return nil, nil, false
		}
	}
}

// jsonInt parses a JSON integer at data[i:], returning its value and the
// index after it; !ok for anything else (fraction, exponent, leading zero,
// overflow, not a number).
func jsonInt(data []byte, i int) (int64, int, bool) {
	neg := i < len(data) && data[i] == '-'
	if neg {
		i++
	}
	start := i
	var v uint64
	for i < len(data) && data[i] >= '0' && data[i] <= '9' {
		if v > (math.MaxUint64-9)/10 {
			return 0, 0, false
		}
		v = v*10 + uint64(data[i]-'0')
		i++
	}
	switch n := i - start; {
	case n == 0, n > 1 && data[start] == '0':
		return 0, 0, false
	case i < len(data) && (data[i] == '.' || data[i] == 'e' || data[i] == 'E'):
		return 0, 0, false
	case !neg && v > math.MaxInt64, neg && v > 1<<63:
		return 0, 0, false
	}
	if neg {
		return -int64(v), i, true // -(1<<63) wraps to itself: MinInt64
	}
	return int64(v), i, true
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// JSONSchema describes the alternatives for the OpenAPI document.
func (Prompt) JSONSchema() map[string]any {
	ids := map[string]any{"type": "array", "items": map[string]any{"type": "integer", "minimum": 0}}
	return map[string]any{"oneOf": []any{
		map[string]any{"type": "string"},
		map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "maxItems": 1},
		ids,
		map[string]any{"type": "array", "items": ids, "maxItems": 1},
	}}
}
