// Package chattmpl renders a chat conversation into the prompt text a model
// was trained on.
//
// The llama2.c models Switchyard serves have no chat format of their own,
// so the default template is a plain transcript:
//
//	System: You are terse.
//	User: Tell me a story.
//	Assistant:
//
// each message on its own "Role: content" line, developer messages shown as
// System, and a final "Assistant:" for the model to continue. The "raw"
// template joins the contents with newlines and adds nothing, for base
// models that just continue text. Which template a model uses is set per
// model with the frontend's -chat-template flag.
package chattmpl

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Message is one rendered message.
type Message struct {
	Role    string
	Content string
}

// Template renders messages into prompt text.
type Template func(msgs []Message) string

// Builtin templates by name.
func builtin(name string) (Template, bool) {
	switch name {
	case "plain":
		return Plain, true
	case "raw":
		return Raw, true
	}
	return nil, false
}

// Plain is the default transcript template.
func Plain(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(roleLabel(m.Role))
		b.WriteString(": ")
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	b.WriteString("Assistant:")
	return b.String()
}

// Raw joins the contents with newlines.
func Raw(msgs []Message) string {
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		parts[i] = m.Content
	}
	return strings.Join(parts, "\n")
}

func roleLabel(role string) string {
	switch role {
	case "system", "developer":
		return "System"
	case "assistant":
		return "Assistant"
	default:
		return "User"
	}
}

// Set picks a template per model.
type Set struct {
	def      Template
	defName  string
	perModel map[string]Template
	names    map[string]string
}

// Parse reads a -chat-template value: a comma-separated list of either a
// template name (the default for every model) or model=template. Empty
// means plain for every model.
func Parse(spec string) (*Set, error) {
	s := &Set{def: Plain, defName: "plain", perModel: map[string]Template{}, names: map[string]string{}}
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		model, name, perModel := strings.Cut(item, "=")
		if !perModel {
			name = model
		}
		t, ok := builtin(name)
		if !ok {
			return nil, fmt.Errorf("chat template %q: want plain or raw", name)
		}
		if !perModel {
			s.def, s.defName = t, name
			continue
		}
		if model == "" {
			return nil, fmt.Errorf("chat template %q: empty model name", item)
		}
		s.perModel[model], s.names[model] = t, name
	}
	return s, nil
}

// For returns the template of model.
func (s *Set) For(model string) Template {
	if t, ok := s.perModel[model]; ok {
		return t
	}
	return s.def
}

// String describes the set, for logs.
func (s *Set) String() string {
	parts := []string{s.defName}
	for _, m := range slices.Sorted(maps.Keys(s.names)) {
		parts = append(parts, m+"="+s.names[m])
	}
	return strings.Join(parts, ",")
}
