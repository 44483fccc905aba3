package httpapi

import (
	"errors"
	"net/http"
	"strings"

	"switchyard.dev/libs/mesh/canary"

	"switchyard.dev/services/frontend/internal/catalog"
	"switchyard.dev/services/frontend/internal/chattmpl"
	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/openai"
)

func (a *API) chat(w http.ResponseWriter, r *http.Request) {
	body, err := a.readBody(w, r)
	if err != nil {
		a.fail(w, r, err, "")
		return
	}
	req, g, err := openai.DecodeChat(body)
	if err != nil {
		a.fail(w, r, err, "")
		return
	}
	conv := chatMessages(req.Messages)
	var f chatFormat
	if use := req.ToolUse(); use != nil {
		conv.Tools, conv.Parallel = chatTools(use.Tools), use.Parallel
		f.tools = newToolReply(use, func() string { return newID("call_") })
	}
	gen, err := a.prepare(r.Context(), g, func(m *catalog.Model) ([]uint32, error) {
		text, err := renderChat(a.cfg.Templates.ForModel(m.Name, m.Template), conv) // the model's own name: an alias has its template
		if err != nil {
			return nil, err
		}
		return textPrompt(text, m, g)
	})
	if err != nil {
		a.fail(w, r, err, g.Model)
		return
	}
	if g.Hints.SessionID == "" {
		gen.AffinityKey = conversationKey(req.Messages)
	}
	c := call{id: newID("chatcmpl-"), created: a.cfg.Now().Unix()}
	a.serve(w, r, epChat, g, gen, c, f)
}

// conversationKey keys a conversation for the canary split by what its
// every turn repeats: its system messages and its first user message.
// Keying by the rendered prompt's leading tokens instead would put every
// conversation behind one long system prompt in the same group.
func conversationKey(ms []openai.ChatMessage) uint64 {
	var b strings.Builder
	for _, m := range ms {
		if m.Role == "system" || m.Role == "developer" {
			b.WriteString(m.Role + "\x00" + m.Content.Text + "\x00")
			continue
		}
		if m.Role == "user" {
			b.WriteString("user\x00" + m.Content.Text)
			break
		}
	}
	return canary.SessionKey(b.String())
}

// chatMessages are a request's messages as the chat templates take them.
// A tool message names its tool as the request did, or else as the call
// it answers did.
func chatMessages(ms []openai.ChatMessage) chattmpl.Conversation {
	out := make([]chattmpl.Message, len(ms))
	toolNames := map[string]string{}
	for i, m := range ms {
		out[i] = chattmpl.Message{Role: m.Role, Content: m.Content.Text, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			out[i].ToolCalls = append(out[i].ToolCalls, chattmpl.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
			toolNames[tc.ID] = tc.Function.Name
		}
		if m.Role == "tool" {
			out[i].Name = m.Name
			if out[i].Name == "" {
				out[i].Name = toolNames[m.ToolCallID]
			}
		}
	}
	return chattmpl.Conversation{Messages: out}
}

// renderChat renders conv with t. A conversation the template cannot
// render is the caller's to fix: a 400 that carries the template's own
// message when it refused the conversation.
func renderChat(t chattmpl.Template, conv chattmpl.Conversation) (string, error) {
	text, err := t(conv)
	if err == nil {
		return text, nil
	}
	var refusal *chattmpl.RefusalError
	if errors.As(err, &refusal) {
		return "", openai.Invalid("messages", "%s", refusal.Message)
	}
	return "", openai.Invalid("messages", "The model's chat template cannot render these messages: %v", err)
}

// chatTools are the offered functions as the chat templates take them.
func chatTools(defs []openai.FunctionDef) []chattmpl.Tool {
	out := make([]chattmpl.Tool, len(defs))
	for i, d := range defs {
		out[i] = chattmpl.Tool{Name: d.Name, Description: d.Description, Parameters: d.Parameters}
	}
	return out
}

// chatFormat builds chat.completion and chat.completion.chunk bodies.
// With tools it reads the reply as calls where they ask for them; without,
// it sends text as it comes.
type chatFormat struct {
	tools *toolReply
}

func (chatFormat) chunk(c call, delta openai.ChatDelta, reason *string, lps []generate.Logprob) openai.ChatChunk {
	choice := openai.ChatChunkChoice{Delta: delta, FinishReason: reason}
	if len(lps) > 0 {
		choice.Logprobs = chatLogprobs(lps)
	}
	return openai.ChatChunk{ID: c.id, Object: openai.ObjectChatCompletionChunk, Created: c.created, Model: c.model,
		Choices: []openai.ChatChunkChoice{choice}}
}

func (f chatFormat) start(c call) any {
	if f.tools != nil {
		return f.tools.start(f, c)
	}
	empty := ""
	return f.chunk(c, openai.ChatDelta{Role: "assistant", Content: &empty}, nil, nil)
}

func (f chatFormat) delta(c call, text string, lps []generate.Logprob) any {
	if f.tools != nil {
		return f.tools.delta(f, c, text, lps)
	}
	return f.chunk(c, openai.ChatDelta{Content: &text}, nil, lps)
}

func (f chatFormat) finish(c call, reason string, lps []generate.Logprob) any {
	if f.tools != nil {
		return f.tools.finish(f, c, reason, lps)
	}
	return f.chunk(c, openai.ChatDelta{}, &reason, lps)
}

func (chatFormat) usage(c call, u openai.Usage) any {
	return openai.ChatChunk{ID: c.id, Object: openai.ObjectChatCompletionChunk, Created: c.created, Model: c.model,
		Choices: []openai.ChatChunkChoice{}, Usage: &u}
}

func (f chatFormat) whole(c call, text, reason string, lps []generate.Logprob, u openai.Usage) any {
	choice := openai.ChatChoice{Message: openai.AssistantReply{Role: "assistant", Content: text}, FinishReason: reason}
	if f.tools != nil {
		if calls, why, ok := f.tools.whole(text, reason); ok {
			choice.Message = openai.AssistantReply{Role: "assistant", ToolCalls: calls}
			choice.FinishReason = why
		}
	}
	if c.logprobs {
		choice.Logprobs = chatLogprobs(lps)
	}
	return openai.ChatCompletion{ID: c.id, Object: openai.ObjectChatCompletion, Created: c.created, Model: c.model,
		Choices: []openai.ChatChoice{choice}, Usage: &u}
}
