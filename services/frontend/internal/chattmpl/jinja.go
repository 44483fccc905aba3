package chattmpl

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"switchyard.dev/services/frontend/internal/jinja"
)

// RefusalError is a conversation the model's template refused with its own
// raise_exception message ("Conversation roles must alternate ..."):
// the caller's to fix, and its message is for the caller.
type RefusalError struct {
	Template string
	Message  string
}

func (r *RefusalError) Error() string {
	return fmt.Sprintf("chat template %s: %s", r.Template, r.Message)
}

// jinjaTemplate is a model's own Jinja chat template.
type jinjaTemplate struct {
	t        *jinja.Template
	bos, eos string
	// systemRole: the template shows a system message. One that drops
	// or refuses it gets it merged into the first user message instead,
	// as llama.cpp does, so a system prompt is never silently lost.
	systemRole bool
	// developerRole: the template handles developer messages itself;
	// otherwise they are given to it as system messages.
	developerRole bool
	// callShape is how the template takes an assistant's calls.
	callShape callShape
}

// callShape is how a template wants an assistant message with tool
// calls: the arguments as an object (Hugging Face's convention) or as
// JSON text, and empty content as "" (what llama.cpp gives templates)
// or as None (as OpenAI clients send it; a few templates show calls
// only then, most print None where they expect a string).
type callShape struct {
	stringArgs  bool
	nullContent bool
}

// callShapes are tried in order of preference; the first under which
// the template shows a probe call is used.
var callShapes = []callShape{{}, {nullContent: true}, {stringArgs: true}, {stringArgs: true, nullContent: true}}

// systemProbe is a system message's content that the capability probe
// looks for in the output.
const systemProbe = "SWITCHYARD_SYSTEM_PROBE"

// Jinja parses src, a model's chat template as Hugging Face renders it
// (tokenizer_config.json's chat_template, or GGUF's
// tokenizer.chat_template); bos and eos are the texts of the model's
// begin and end of sequence tokens, which templates print. name
// identifies the template in errors. A template that does not parse is
// an error here, not at render time.
func Jinja(name, src, bos, eos string) (Template, error) {
	t, err := jinja.Parse(name, src)
	if err != nil {
		return nil, err
	}
	j := &jinjaTemplate{t: t, bos: bos, eos: eos, systemRole: true, developerRole: strings.Contains(src, "developer")}
	out, err := j.render(Conversation{Messages: []Message{{Role: "system", Content: systemProbe}, {Role: "user", Content: "Hi"}}})
	j.systemRole = err == nil && strings.Contains(out, systemProbe)
	for _, shape := range callShapes {
		j.callShape = shape
		if out, err := j.render(callProbe); err == nil && strings.Contains(out, "value") {
			return j.Render, nil
		}
	}
	j.callShape = callShapes[0]
	return j.Render, nil
}

// callProbe is a tool round trip, to learn how a template takes a
// call's arguments.
var callProbe = Conversation{
	Messages: []Message{
		{Role: "user", Content: "Hi"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "call00001", Name: "tool1", Arguments: `{"arg": "value"}`}}},
		{Role: "tool", Content: "result", ToolCallID: "call00001", Name: "tool1"},
		{Role: "user", Content: "Thanks"},
	},
	Tools: []Tool{{Name: "tool1", Description: "A tool.", Parameters: []byte(`{"type": "object", "properties": {"arg": {"type": "string", "description": "An argument."}}, "required": ["arg"]}`)}},
}

// Render renders c with the template.
func (j *jinjaTemplate) Render(c Conversation) (string, error) {
	out, err := j.render(c)
	var ex *jinja.RaisedError
	if errors.As(err, &ex) {
		return "", &RefusalError{Template: j.t.Name(), Message: ex.Message}
	}
	return out, err
}

func (j *jinjaTemplate) render(c Conversation) (string, error) {
	vars := map[string]any{
		"messages":              j.messages(c.Messages),
		"add_generation_prompt": true,
		"bos_token":             j.bos,
		"eos_token":             j.eos,
	}
	if len(c.Tools) > 0 {
		vars["tools"] = jinjaTools(c.Tools)
	}
	return j.t.Render(vars, jinja.Options{})
}

// messages are c's messages as Hugging Face's apply_chat_template gives
// them to the template (OpenAI's shape, in the call shape the template
// takes), after the role adjustments above.
func (j *jinjaTemplate) messages(ms []Message) *jinja.List {
	ms = j.adjustRoles(ms)
	out := jinja.NewList()
	for _, m := range ms {
		var content any = m.Content
		if m.Content == "" && len(m.ToolCalls) > 0 && j.callShape.nullContent {
			content = nil
		}
		d := jinja.NewDict().Set("role", m.Role).Set("content", content)
		if len(m.ToolCalls) > 0 {
			calls := jinja.NewList()
			for _, tc := range m.ToolCalls {
				var args any = tc.Arguments
				if !j.callShape.stringArgs {
					args = callArguments(tc.Arguments)
				}
				fn := jinja.NewDict().Set("name", tc.Name).Set("arguments", args)
				call := jinja.NewDict()
				if tc.ID != "" {
					call.Set("id", tc.ID)
				}
				calls.Items = append(calls.Items, call.Set("type", "function").Set("function", fn))
			}
			d.Set("tool_calls", calls)
		}
		if m.ToolCallID != "" {
			d.Set("tool_call_id", m.ToolCallID)
		}
		if m.Name != "" {
			d.Set("name", m.Name)
		}
		out.Items = append(out.Items, d)
	}
	return out
}

// adjustRoles maps developer to system for templates that do not know
// it, and merges a leading system message into the next message
// ("system\nuser") for templates without a system role.
func (j *jinjaTemplate) adjustRoles(ms []Message) []Message {
	if !j.developerRole {
		mapped := make([]Message, len(ms))
		for i, m := range ms {
			if m.Role == "developer" {
				m.Role = "system"
			}
			mapped[i] = m
		}
		ms = mapped
	}
	if j.systemRole || len(ms) == 0 || ms[0].Role != "system" {
		return ms
	}
	if len(ms) == 1 {
		return nil
	}
	merged := append([]Message{}, ms[1:]...)
	merged[0].Content = ms[0].Content + "\n" + merged[0].Content
	return merged
}

// callArguments is a call's arguments as a JSON value; text that is not
// JSON stays the string it is.
func callArguments(args string) any {
	if v, err := jinja.ParseJSON([]byte(args)); err == nil {
		return v
	}
	return args
}

func jinjaTools(tools []Tool) *jinja.List {
	out := jinja.NewList()
	for _, t := range tools {
		fn := jinja.NewDict().Set("name", t.Name)
		if t.Description != "" {
			fn.Set("description", t.Description)
		}
		if len(t.Parameters) > 0 {
			if p, err := jinja.ParseJSON(t.Parameters); err == nil {
				fn.Set("parameters", p)
			}
		}
		out.Items = append(out.Items, jinja.NewDict().Set("type", "function").Set("function", fn))
	}
	return out
}

// tokenizerConfig is what a Hugging Face tokenizer_config.json says about
// chat: the template (a string, or named templates of which "default"
// is used) and the special tokens (strings or {"content": ...}).
type tokenizerConfig struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
	BOS          json.RawMessage `json:"bos_token"`
	EOS          json.RawMessage `json:"eos_token"`
}

// FromTokenizerConfig reads a Hugging Face tokenizer_config.json's chat
// template and special tokens; name identifies it in errors.
func FromTokenizerConfig(name string, data []byte) (Template, error) {
	var c tokenizerConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("chat template %s: %w", name, err)
	}
	src, err := configTemplate(c.ChatTemplate)
	if err != nil {
		return nil, fmt.Errorf("chat template %s: %w", name, err)
	}
	return Jinja(name, src, tokenText(c.BOS), tokenText(c.EOS))
}

func configTemplate(raw json.RawMessage) (string, error) {
	var src string
	if json.Unmarshal(raw, &src) == nil && src != "" {
		return src, nil
	}
	var named []struct{ Name, Template string }
	if json.Unmarshal(raw, &named) == nil {
		for _, n := range named {
			if n.Name == "default" {
				return n.Template, nil
			}
		}
	}
	return "", errors.New("no chat_template (a string, or a list with one named default)")
}

func tokenText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var tok struct{ Content string }
	_ = json.Unmarshal(raw, &tok) // anything else: no token
	return tok.Content
}
