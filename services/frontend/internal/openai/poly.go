package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// The OpenAI API has fields of more than one JSON type. Each is a Go type
// here with its own UnmarshalJSON, and a JSONSchema method so the generated
// OpenAPI document states the alternatives.

// errNull marks a JSON null where a value is required.
var errNull = errors.New("null")

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

// UnmarshalJSON implements json.Unmarshaler.
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
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	if len(raw) == 0 {
		p.Texts = []string{}
		return nil
	}
	first := bytes.TrimSpace(raw[0])
	switch {
	case len(first) > 0 && first[0] == '"':
		return json.Unmarshal(data, &p.Texts)
	case len(first) > 0 && first[0] == '[':
		return json.Unmarshal(data, &p.Tokens)
	default:
		var ids []int64
		if err := json.Unmarshal(data, &ids); err != nil {
			return err
		}
		p.Tokens = [][]int64{ids}
		return nil
	}
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
