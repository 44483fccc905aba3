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
//
// Tools and tool traffic render as JSON in the shape the engine generates
// a call in ({"name":...,"arguments":...}, or an array of them), so the
// model sees its own calls in the history as it is asked to write them
// (tools.go). A conversation without tools or tool traffic renders exactly
// as it did before tools existed.
package chattmpl

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Conversation is what a template renders.
type Conversation struct {
	Messages []Message
	// Tools are the functions offered to the model; none renders no tool
	// instructions.
	Tools []Tool
	// Parallel asks for calls as an array of one or more.
	Parallel bool
}

// Message is one rendered message.
type Message struct {
	Role    string
	Content string
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall
}

// Template renders a conversation into prompt text.
type Template func(c Conversation) string

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

// Plain is the default transcript template. Offered tools come first as
// System lines; an assistant's calls follow its content on its line; a
// tool result is a "Tool:" line.
func Plain(c Conversation) string {
	var b strings.Builder
	if len(c.Tools) > 0 {
		b.WriteString("System: ")
		writeToolPreamble(&b, c.Tools, c.Parallel)
		b.WriteByte('\n')
	}
	for _, m := range c.Messages {
		b.WriteString(roleLabel(m.Role))
		b.WriteString(": ")
		writeContent(&b, m)
		b.WriteByte('\n')
	}
	b.WriteString("Assistant:")
	return b.String()
}

// Raw joins the contents with newlines, an assistant's calls after its
// content. It adds nothing, not even the tools.
func Raw(c Conversation) string {
	parts := make([]string, len(c.Messages))
	for i, m := range c.Messages {
		var b strings.Builder
		writeContent(&b, m)
		parts[i] = b.String()
	}
	return strings.Join(parts, "\n")
}

// writeContent writes a message's content, then its calls, space-separated.
func writeContent(b *strings.Builder, m Message) {
	b.WriteString(m.Content)
	if len(m.ToolCalls) == 0 {
		return
	}
	if m.Content != "" {
		b.WriteByte(' ')
	}
	writeCalls(b, m.ToolCalls)
}

func roleLabel(role string) string {
	switch role {
	case "system", "developer":
		return "System"
	case "assistant":
		return "Assistant"
	case "tool":
		return "Tool"
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
