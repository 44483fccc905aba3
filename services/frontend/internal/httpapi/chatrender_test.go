package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"switchyard.dev/services/frontend/internal/chattmpl"
	"switchyard.dev/services/frontend/internal/openai"
)

// A conversation a chat template cannot render is a 400 on messages; a
// template's own raise_exception message reaches the caller as written.
func TestRenderChatErrors(t *testing.T) {
	t.Parallel()
	conv := chattmpl.Conversation{Messages: []chattmpl.Message{{Role: "assistant", Content: "first"}}}
	tests := []struct {
		name, src, want string
	}{
		{"refusal", "{% if messages[0].role != 'user' %}{{ raise_exception('Conversations must start with a user message.') }}{% endif %}",
			"Conversations must start with a user message."},
		{"template error", "{{ messages[0].content + 1 }}", "cannot render these messages"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmpl, err := chattmpl.Jinja(tc.name, tc.src, "", "")
			if err != nil {
				t.Fatal(err)
			}
			_, err = renderChat(tmpl, conv)
			var e *openai.Error
			if !errors.As(err, &e) || e.Status != http.StatusBadRequest || e.Param != "messages" || !strings.Contains(e.Message, tc.want) {
				t.Fatalf("err = %v, want a 400 on messages saying %q", err, tc.want)
			}
			if tc.name == "refusal" && e.Message != tc.want {
				t.Fatalf("message %q, want the template's own %q", e.Message, tc.want)
			}
		})
	}
}

// Tool traffic reaches templates with its ids, and a tool message names
// its tool: as sent, or as the call it answers named it.
func TestChatMessagesToolFields(t *testing.T) {
	t.Parallel()
	var asked, answered openai.ChatMessage
	asked.Role = "assistant"
	asked.ToolCalls = []openai.ToolCall{{ID: "call_1", Type: "function", Function: openai.FunctionCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}
	answered.Role, answered.ToolCallID = "tool", "call_1"
	named := answered
	named.Name = "weather_tool"
	c := chatMessages([]openai.ChatMessage{asked, answered, named})
	if got := c.Messages[0].ToolCalls[0]; got.ID != "call_1" || got.Name != "get_weather" {
		t.Errorf("call %+v", got)
	}
	if m := c.Messages[1]; m.ToolCallID != "call_1" || m.Name != "get_weather" {
		t.Errorf("tool message %+v, want its call's id and name", m)
	}
	if m := c.Messages[2]; m.Name != "weather_tool" {
		t.Errorf("tool message %+v, want the name it was sent with", m)
	}
}
