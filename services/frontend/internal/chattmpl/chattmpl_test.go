package chattmpl

import "testing"

func TestRender(t *testing.T) {
	t.Parallel()
	msgs := []Message{{Role: "system", Content: "Be terse."}, {Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello"},
		{Role: "developer", Content: "No."}, {Role: "user", Content: "Story?"}}
	tests := []struct {
		spec, model, want string
	}{
		{"", "m", "System: Be terse.\nUser: Hi\nAssistant: Hello\nSystem: No.\nUser: Story?\nAssistant:"},
		{"raw", "m", "Be terse.\nHi\nHello\nNo.\nStory?"},
		{"plain,m=raw", "m", "Be terse.\nHi\nHello\nNo.\nStory?"},
		{"m=raw", "other", "System: Be terse.\nUser: Hi\nAssistant: Hello\nSystem: No.\nUser: Story?\nAssistant:"},
	}
	for _, tc := range tests {
		t.Run(tc.spec+"/"+tc.model, func(t *testing.T) {
			t.Parallel()
			s, err := Parse(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.For(tc.model)(Conversation{Messages: msgs})
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v\nwant %q", got, err, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"jinja", "m=jinja", "=raw"} {
		if _, err := Parse(spec); err == nil {
			t.Errorf("Parse(%q): no error", spec)
		}
	}
}
