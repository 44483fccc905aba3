package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"switchyard.dev/services/frontend/internal/openai"
)

// A model answers to its aliases: /v1/models lists them, a completion
// asked for by an alias is served by the model's workers and echoes the
// alias.
func TestAliases(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{aliases: map[string]string{"gpt-small": "tiny", "nobody": "absent"}})
	var list openai.ModelList
	resp, err := http.Get(s.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	decode(t, resp, &list)
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "tiny,gpt-small" {
		t.Fatalf("models %v, want tiny and its alias (not an alias of a model nobody serves)", ids)
	}
	var got openai.Completion
	r := s.post(t, "/v1/completions", `{"model":"gpt-small","prompt":"Hi","max_tokens":3}`)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("status %d", r.StatusCode)
	}
	decode(t, r, &got)
	if got.Model != "gpt-small" || got.Usage.CompletionTokens != 3 {
		t.Fatalf("completion %+v: want it served and the alias echoed", got)
	}
}

func TestParseAliases(t *testing.T) {
	t.Parallel()
	got, err := ParseAliases(" a=m, b=m ,")
	if err != nil || len(got) != 2 || got["a"] != "m" || got["b"] != "m" {
		t.Fatalf("ParseAliases: %v %v", got, err)
	}
	for _, bad := range []string{"a", "=m", "a=", "m=m", "a=m,a=n", "a=b,b=m"} {
		if _, err := ParseAliases(bad); err == nil {
			t.Errorf("ParseAliases(%q): want an error", bad)
		}
	}
}
