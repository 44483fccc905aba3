package auth

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		keys   []string
		header string
		status int
	}{
		{name: "no keys configured", header: "", status: 0},
		{name: "missing", keys: []string{"k1"}, header: "", status: 401},
		{name: "wrong scheme", keys: []string{"k1"}, header: "Basic k1", status: 401},
		{name: "bad key", keys: []string{"k1"}, header: "Bearer nope", status: 401},
		{name: "good key", keys: []string{"k1", "k2"}, header: "Bearer k2", status: 0},
		{name: "case-insensitive scheme", keys: []string{"k1"}, header: "bearer k1", status: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := New(Config{Keys: tc.keys})
			r, _ := http.NewRequest(http.MethodGet, "/", nil)
			if tc.header != "" {
				r.Header.Set("Authorization", tc.header)
			}
			err := g.Check(r)
			if (tc.status == 0) != (err == nil) || err != nil && err.Status != tc.status {
				t.Fatalf("got %v, want status %d", err, tc.status)
			}
		})
	}
}

func TestRateLimitPerKey(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	g := New(Config{Keys: []string{"a", "b"}, Rate: 2, Burst: 2, Now: func() time.Time { return now }})
	req := func(key string) *http.Request {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer "+key)
		return r
	}
	for i := range 2 {
		if err := g.Check(req("a")); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	err := g.Check(req("a"))
	if err == nil || err.Status != http.StatusTooManyRequests || err.RetryAfter != 500*time.Millisecond {
		t.Fatalf("third request: %+v", err)
	}
	if err := g.Check(req("b")); err != nil {
		t.Fatalf("other key limited: %v", err)
	}
	now = now.Add(500 * time.Millisecond)
	if err := g.Check(req("a")); err != nil {
		t.Fatalf("after refill: %v", err)
	}
}

func TestLoadKeys(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("# comment\nk1\n\n  k2  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := LoadKeys(path, "k3, ,k4")
	if err != nil || len(keys) != 4 {
		t.Fatalf("keys %v err %v", keys, err)
	}
	if _, err := LoadKeys(filepath.Join(t.TempDir(), "missing"), ""); err == nil {
		t.Fatal("missing file: no error")
	}
	empty := filepath.Join(t.TempDir(), "empty")
	_ = os.WriteFile(empty, []byte("# none\n"), 0o600)
	if _, err := LoadKeys(empty, ""); err == nil {
		t.Fatal("empty file: no error")
	}
}
