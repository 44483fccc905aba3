package chattmpl

import (
	"os"
	"testing"

	"switchyard.dev/libs/sharedtest"
)

// knownFailures are llama.cpp's jinja vectors this package renders
// differently, by case name, with the reason.
var knownFailures = map[string]string{}

// TestLlamaCppVectors renders every template of llama.cpp's
// test-chat-template.cpp that it runs through its Jinja engine, with its
// conversation and tokens, and wants its expected output exactly.
func TestLlamaCppVectors(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(sharedtest.LlamaCpp(t, "tests/test-chat-template.cpp"))
	if err != nil {
		t.Fatal(err)
	}
	conv, cases, err := parseCases(string(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(conv) == 0 || len(cases) < 30 {
		t.Fatalf("read %d messages and %d cases: the test file's layout changed", len(conv), len(cases))
	}
	var ran, passed int
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.jinja {
				t.Skip("llama.cpp does not run it through Jinja")
			}
			if why, ok := knownFailures[tc.name]; ok {
				t.Skip(why)
			}
			ran++
			tmpl, err := Jinja(tc.name, tc.template, tc.bos, tc.eos)
			if err != nil {
				t.Fatal(err)
			}
			var c Conversation
			for _, m := range append(append([]msg{}, conv...), tc.extra...) {
				c.Messages = append(c.Messages, Message{Role: m[0], Content: m[1]})
			}
			got, err := tmpl(c)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.expectedJinja
			if want == "" {
				want = tc.expected
			}
			if got != want {
				t.Fatalf("got\n%q\nwant\n%q", got, want)
			}
			passed++
		})
	}
	t.Logf("%d of %d cases run through Jinja render exactly (%d known failures)", passed, ran, len(knownFailures))
}
