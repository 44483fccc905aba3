package jinja

import "testing"

// BenchmarkRenderChat renders a ChatML-style template over a 100-message
// conversation.
func BenchmarkRenderChat(b *testing.B) {
	tm, err := Parse("b", "{%- for m in messages %}{{- '<|im_start|>' + m.role + '\\n' + m.content | trim + '<|im_end|>\\n' }}{%- endfor %}"+
		"{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
	if err != nil {
		b.Fatal(err)
	}
	msgs := NewList()
	for i := range 100 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs.Items = append(msgs.Items, NewDict().Set("role", role).Set("content", "Some message text of a typical length, a sentence or two long."))
	}
	vars := map[string]any{"messages": msgs, "add_generation_prompt": true}
	for b.Loop() {
		if _, err := tm.Render(vars, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
