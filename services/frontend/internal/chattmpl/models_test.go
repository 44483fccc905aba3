package chattmpl

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"switchyard.dev/libs/sharedtest"
)

// toolConversation has every kind of message a template must render:
// a system prompt, an offered tool, an assistant's call and its result.
var toolConversation = Conversation{
	Messages: []Message{
		{Role: "system", Content: "You are a helpful assistant."},
		{Role: "user", Content: "What is the weather in Paris?"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "call00001", Name: "get_weather", Arguments: `{"city": "Paris", "unit": "celsius"}`}}},
		{Role: "tool", Content: `{"temperature": 18}`, ToolCallID: "call00001", Name: "get_weather"},
		{Role: "assistant", Content: "It is 18 °C in Paris."},
		{Role: "user", Content: "Thanks!"},
	},
	Tools: []Tool{{Name: "get_weather", Description: "Current weather in a city.",
		Parameters: []byte(`{"type": "object", "properties": {"city": {"type": "string", "description": "City name"}, "unit": {"type": "string", "description": "Temperature unit", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}`)}},
}

// chatConversation has a system prompt and no tool traffic, for
// templates of models without tool use.
var chatConversation = Conversation{Messages: []Message{
	{Role: "system", Content: "You are a helpful assistant."},
	{Role: "user", Content: "What is the weather in Paris?"},
	{Role: "assistant", Content: "It is 18 °C in Paris."},
	{Role: "user", Content: "Thanks!"},
}}

// chatOnly are templates (file names under models/templates) of models
// without tool use, which render the plain chat instead.
var chatOnly = map[string]string{
	"google-gemma-2-2b-it":            "no tool role: its template refuses one",
	"microsoft-Phi-3.5-mini-instruct": "no tool role: its template drops one",
	"HuggingFaceTB-SmolLM3-3B":        "this copy of the template ignores tools",
	"llama-cpp-rwkv-world":            "no tool role",
}

// skipped are templates that cannot render here, with the reason.
var skipped = map[string]string{
	"fireworks-ai-llama-3-firefunction-v2": "needs datetime and functions variables, which Hugging Face leaves to the caller",
}

// TestModelTemplates renders every real template of llama.cpp's
// collection with a conversation with a system prompt, a tool, a call
// and its result (the plain chat for chatOnly ones): it must render and
// show all of them.
func TestModelTemplates(t *testing.T) {
	t.Parallel()
	for name, src := range modelTemplates(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if why, ok := skipped[name]; ok {
				t.Skip(why)
			}
			_, chat := chatOnly[name]
			c := toolConversation
			if chat {
				c = chatConversation
			}
			tmpl, err := Jinja(name, src, "<s>", "</s>")
			if err != nil {
				t.Fatal(err)
			}
			out, err := tmpl(c)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{"You are a helpful assistant.", "What is the weather in Paris?", "Thanks!"}
			if !chat {
				want = append(want, "get_weather", "celsius", "temperature")
			}
			if strings.Contains(strings.ReplaceAll(out, "= None", ""), "None") { // Cohere's signatures default to None
				t.Errorf("output shows a None:\n%s", out)
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// modelTemplates are llama.cpp's real templates by file name.
func modelTemplates(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(sharedtest.LlamaCpp(t, "models/templates"), "*.jinja"))
	if err != nil || len(paths) < 50 {
		t.Fatalf("%d templates: %v", len(paths), err)
	}
	out := map[string]string{}
	for _, p := range paths {
		src, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".jinja")] = string(src)
	}
	return out
}

// TestModelTemplatesLongConversation: a thousand-message conversation
// renders under the engine's default limits with every template.
func TestModelTemplatesLongConversation(t *testing.T) {
	t.Parallel()
	long := func(c Conversation) Conversation {
		out := Conversation{Tools: c.Tools, Messages: slices.Clone(c.Messages[:1])} // a copy: appending must not write into the shared conversations
		turn := c.Messages[1 : len(c.Messages)-1]
		for len(out.Messages) < 1000 {
			out.Messages = append(out.Messages, turn...)
		}
		out.Messages = append(out.Messages, c.Messages[len(c.Messages)-1])
		return out
	}
	for name, src := range modelTemplates(t) {
		if _, ok := skipped[name]; ok {
			continue
		}
		c := toolConversation
		if _, ok := chatOnly[name]; ok {
			c = chatConversation
		}
		tmpl, err := Jinja(name, src, "<s>", "</s>")
		if err == nil {
			_, err = tmpl(long(c))
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
