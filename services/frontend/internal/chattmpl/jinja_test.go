package chattmpl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// echo is a template that shows what it is given.
const echo = `{%- for m in messages -%}
[{{ m.role }}:{{ m.content }}{% if m.tool_calls %} calls={{ m.tool_calls | tojson }}{% endif %}{% if m.tool_call_id %} id={{ m.tool_call_id }} name={{ m.name }}{% endif %}]
{%- endfor -%}
{% if tools is defined %} tools={{ tools | tojson }}{% endif %} gen={{ add_generation_prompt }} {{ bos_token }}{{ eos_token }}`

func TestJinjaVariables(t *testing.T) {
	t.Parallel()
	tmpl, err := Jinja("echo", echo, "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		c    Conversation
		want string
	}{
		{"plain", Conversation{Messages: []Message{{Role: "system", Content: "S"}, {Role: "user", Content: "U"}}},
			"[system:S][user:U] gen=True <s></s>"},
		{"developer is system", Conversation{Messages: []Message{{Role: "developer", Content: "D"}}},
			"[system:D] gen=True <s></s>"},
		{"tool traffic", Conversation{
			Messages: []Message{
				{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: `{"b": 1, "a": "é"}`}, {Name: "g", Arguments: "not json"}}},
				{Role: "tool", Content: "R", ToolCallID: "c1", Name: "f"},
			},
			Tools: []Tool{{Name: "f", Description: "F.", Parameters: []byte(`{"type": "object"}`)}, {Name: "g"}},
		}, `[assistant: calls=[{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"b": 1, "a": "é"}}}, ` +
			`{"type": "function", "function": {"name": "g", "arguments": "not json"}}]][tool:R id=c1 name=f]` +
			` tools=[{"type": "function", "function": {"name": "f", "description": "F.", "parameters": {"type": "object"}}}, {"type": "function", "function": {"name": "g"}}]` +
			` gen=True <s></s>`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tmpl(tc.c)
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v\nwant %q", got, err, tc.want)
			}
		})
	}
}

// Templates get what they can show: a system prompt merged into the
// first user turn when they drop or refuse one, developer kept for
// those that know it, a call's arguments as text for those that only
// take text, and None content for those that show calls only then.
func TestJinjaAdjustments(t *testing.T) {
	t.Parallel()
	sys := []Message{{Role: "system", Content: "S"}, {Role: "user", Content: "U"}, {Role: "assistant", Content: "A"}}
	call := []Message{{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: `{"x": 1}`}}}}
	tests := []struct {
		name, src string
		msgs      []Message
		want      string
	}{
		{"refuses system", "{% if messages[0].role == 'system' %}{{ raise_exception('no system') }}{% endif %}{% for m in messages %}<{{ m.role }}:{{ m.content }}>{% endfor %}",
			sys, "<user:S\nU><assistant:A>"},
		{"drops system", "{% for m in messages if m.role != 'system' %}<{{ m.role }}:{{ m.content }}>{% endfor %}", sys, "<user:S\nU><assistant:A>"},
		{"only system", "{% for m in messages if m.role != 'system' %}<{{ m.role }}:{{ m.content }}>{% endfor %}", sys[:1], ""},
		{"keeps system", "{% for m in messages %}<{{ m.role }}:{{ m.content }}>{% endfor %}", sys, "<system:S><user:U><assistant:A>"},
		{"knows developer", "{% for m in messages %}{% if m.role == 'developer' %}dev:{% endif %}{{ m.content }}{% endfor %}",
			[]Message{{Role: "developer", Content: "D"}}, "dev:D"},
		{"string arguments", "{% for m in messages %}{% for c in m.tool_calls %}{{ '<' + c.function.arguments + '>' }}{% endfor %}{% endfor %}",
			call, `<{"x": 1}>`},
		{"object arguments", "{% for m in messages %}{% for c in m.tool_calls %}{{ c.function.arguments.x }}{% endfor %}{% endfor %}", call, "1"},
		{"null content", "{% for m in messages %}{% if m.content is none %}{% for c in m.tool_calls %}{{ c.function.name }}{{ c.function.arguments | tojson }}{% endfor %}{% endif %}{% endfor %}",
			call, `f{"x": 1}`},
		{"empty content", "{% for m in messages %}[{{ m.content }}]{% for c in m.tool_calls %}{{ c.function.name }}{% endfor %}{% endfor %}", call, "[]f"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tmpl, err := Jinja(tc.name, tc.src, "", "")
			if err != nil {
				t.Fatal(err)
			}
			got, err := tmpl(Conversation{Messages: tc.msgs})
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v\nwant %q", got, err, tc.want)
			}
		})
	}
}

func TestJinjaErrors(t *testing.T) {
	t.Parallel()
	if _, err := Jinja("broken.jinja", "{% for x in y %}", "", ""); err == nil || !strings.Contains(err.Error(), "broken.jinja") {
		t.Errorf("parse error %v, want one naming the template", err)
	}
	tmpl, err := Jinja("strict", "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('No tools here.') }}{% endif %}{% endfor %}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl(Conversation{Messages: []Message{{Role: "tool", Content: "x"}}})
	var r *RefusalError
	if !errors.As(err, &r) || r.Message != "No tools here." || r.Template != "strict" {
		t.Fatalf("err = %v, want the template's refusal", err)
	}
}

// -chat-template loads .jinja files and tokenizer_config.json files, and
// a bad one fails naming it.
func TestParseFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const src = "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ eos_token }}{% endfor %}<assistant>"
	jinjaFile := write("chat.jinja", src)
	config := write("tokenizer_config.json", `{"bos_token": "<s>", "eos_token": {"content": "</s>", "lstrip": false}, "chat_template": `+quote(src)+`}`)
	named := write("named.json", `{"bos_token": "[B]", "chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": `+quote(src)+`}]}`)
	broken := write("broken.jinja", "{% if %}")
	msgs := Conversation{Messages: []Message{{Role: "user", Content: "Hi"}}}
	for _, tc := range []struct{ spec, want string }{
		{jinjaFile, "<user>Hi<assistant>"},
		{"m=" + config, "<s><user>Hi</s><assistant>"},
		{"m=" + named, "[B]<user>Hi<assistant>"},
	} {
		s, err := Parse(tc.spec)
		if err != nil {
			t.Fatalf("Parse(%s): %v", tc.spec, err)
		}
		got, err := s.For("m")(msgs)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.spec, got, err, tc.want)
		}
	}
	for _, spec := range []string{broken, filepath.Join(dir, "missing.jinja"), write("empty.json", `{"bos_token": "<s>"}`), write("bad.json", "{")} {
		if _, err := Parse("m=" + spec); err == nil || !strings.Contains(err.Error(), filepath.Base(spec)) {
			t.Errorf("Parse(%s) = %v, want an error naming the file", spec, err)
		}
	}
	if s, _ := Parse("plain,m=" + jinjaFile); s.String() != "plain,m="+jinjaFile {
		t.Errorf("String() = %q", s.String())
	}
}

func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// FuzzFromTokenizerConfig: any file loads or fails, never panics.
func FuzzFromTokenizerConfig(f *testing.F) {
	f.Add([]byte(`{"bos_token": "<s>", "eos_token": {"content": "</s>"}, "chat_template": "{{ bos_token }}{{ messages[0].content }}"}`))
	f.Add([]byte(`{"chat_template": [{"name": "default", "template": "{% for m in messages %}{{ m.role }}{% endfor %}"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tmpl, err := FromTokenizerConfig("fuzz", data)
		if err != nil {
			return
		}
		_, _ = tmpl(toolConversation)
	})
}
