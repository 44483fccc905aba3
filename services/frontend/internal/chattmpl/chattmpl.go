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
//
// Real models bring their own chat template, in Jinja: Jinja (jinja.go)
// renders one with what Hugging Face's apply_chat_template gives it —
// messages in OpenAI's shape (tool calls with their arguments as an
// object, tool results with tool_call_id and the tool's name), tools
// (undefined when none are offered), add_generation_prompt true, bos_token
// and eos_token, raise_exception and strftime_now — through the engine in
// internal/jinja. Two adjustments follow llama.cpp, whose test vectors
// the package is checked against: a template that drops or refuses a
// system message gets it merged into the first user message, and
// developer messages reach templates that never mention that role as
// system messages. Templates differ in how they take a call (arguments
// as an object or as JSON text, empty content as "" or None): a probe
// at load time finds the shape each one shows. Special tokens are text
// in the rendered prompt; turning them into token ids is the
// tokenizer's business.
//
// A template is only ever chosen by the operator (-chat-template) or
// shipped with the model, never by a request; still, every render runs
// under the engine's step, byte and call-depth limits, so no template can
// hang or crash the frontend.
package chattmpl

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
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
	// ToolCallID is, in a tool message, the id of the call it answers.
	ToolCallID string
	// Name is, in a tool message, the name of the tool that answered.
	Name string
}

// Template renders a conversation into prompt text. An error is the
// conversation the template cannot render (a *RefusalError when the template
// itself refused it).
type Template func(c Conversation) (string, error)

// Builtin templates by name.
func builtin(name string) (Template, bool) {
	switch name {
	case "plain":
		return func(c Conversation) (string, error) { return Plain(c), nil }, true
	case "raw":
		return func(c Conversation) (string, error) { return Raw(c), nil }, true
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
// template (the default for every model) or model=template. A template
// is plain, raw, a file of Jinja source (NAME.jinja, rendered with empty
// bos_token and eos_token) or a Hugging Face tokenizer_config.json
// (NAME.json: its chat_template and special tokens). Files are read and
// parsed here, so a bad one fails start-up, naming it. Empty means plain
// for every model.
func Parse(spec string) (*Set, error) {
	plain, _ := builtin("plain")
	s := &Set{def: plain, defName: "plain", perModel: map[string]Template{}, names: map[string]string{}}
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		model, name, perModel := strings.Cut(item, "=")
		if !perModel {
			name = model
		}
		t, err := load(name)
		if err != nil {
			return nil, err
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

// load resolves one template of a -chat-template value.
func load(name string) (Template, error) {
	if t, ok := builtin(name); ok {
		return t, nil
	}
	ext := filepath.Ext(name)
	if ext != ".jinja" && ext != ".json" {
		return nil, fmt.Errorf("chat template %q: want plain, raw, a .jinja file or a tokenizer_config.json", name)
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	if ext == ".json" {
		return FromTokenizerConfig(name, data)
	}
	return Jinja(name, string(data), "", "")
}

// For returns the template of model.
func (s *Set) For(model string) Template {
	return s.ForModel(model, nil)
}

// ForModel is For for a model that ships its own template (own; nil for
// none): a template set for the model by name comes first, then the
// model's own, then the set's default, so the default (plain unless set)
// is for models without a template of their own.
func (s *Set) ForModel(model string, own Template) Template {
	if t, ok := s.perModel[model]; ok {
		return t
	}
	if own != nil {
		return own
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
