package httpapi

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"switchyard.dev/services/frontend/internal/auth"
)

// A key's token budget is charged the prompt and completion tokens of
// each request: once spent, its next request is a 429 with Retry-After,
// in OpenAI's envelope, while another key still passes.
func TestTokensPerMinuteThroughAPI(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{guard: auth.New(auth.Config{Keys: []string{"a", "b"}, Defaults: auth.Limits{TokensPerMinute: 30}})})
	body := `{"model": "tiny", "prompt": "Hello", "max_tokens": 40}`
	res := s.post(t, "/v1/completions", body, "Authorization", "Bearer a")
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("first request: %d %s", res.StatusCode, b)
	}
	res.Body.Close()
	res = s.post(t, "/v1/completions", body, "Authorization", "Bearer a")
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" || !json429(b) {
		t.Fatalf("after 40+ tokens of a 30-token minute: %d %q %s; want 429 with Retry-After", res.StatusCode, res.Header.Get("Retry-After"), b)
	}
	res = s.post(t, "/v1/completions", body, "Authorization", "Bearer b")
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("another key: %d", res.StatusCode)
	}
}

func json429(b []byte) bool { return strings.Contains(string(b), `"rate_limit_exceeded"`) }
