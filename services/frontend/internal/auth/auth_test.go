package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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

func TestLoadEntries(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys")
	h := sha256.Sum256([]byte("hashed-key"))
	file := "# comment\nk1\n\n  k2 name=team-b rps=2 tpm=1000 concurrency=3  \nsha256:" + hex.EncodeToString(h[:]) + " admin\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := LoadEntries(path, "k3, ,k4", false)
	if err != nil || len(keys) != 5 {
		t.Fatalf("keys %v err %v", keys, err)
	}
	if k := keys[3]; k.Name != "team-b" || k.Limits != (Limits{RequestsPerSecond: 2, TokensPerMinute: 1000, Concurrent: 3}) || k.Admin {
		t.Errorf("k2: %+v", k)
	}
	if k := keys[4]; k.ID != h || !k.Admin {
		t.Errorf("the hashed key: %+v", k)
	}
	g := New(Config{Entries: keys})
	for _, key := range []string{"k1", "k3", "hashed-key"} {
		if err := g.Check(bearerReq(key)); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
	if !g.Admin(bearerReq("hashed-key")) {
		t.Error("the hashed admin key is not admin")
	}
	for _, tc := range []struct{ file, want string }{
		{"", "no keys in file"},
		{"# none\n", "no keys in file"},
		{"k1 rps=-1\n", "rps"},
		{"k1 color=red\n", "unknown attribute"},
		{"sha256:abcd\n", "64 hex digits"},
		{"k1 name=\n", "name"},
		{"k1\nk2 tpm=x\n", ":2:"},
	} {
		p := filepath.Join(t.TempDir(), "keys")
		_ = os.WriteFile(p, []byte(tc.file), 0o600)
		if _, err := LoadEntries(p, "", false); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v; want %q", tc.file, err, tc.want)
		}
	}
	if _, err := LoadEntries(filepath.Join(t.TempDir(), "missing"), "", false); err == nil {
		t.Fatal("missing file: no error")
	}
}

func bearerReq(key string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/completions", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	return r
}

func TestAdminKeys(t *testing.T) {
	t.Parallel()
	g := New(Config{Keys: []string{"user"}, AdminKeys: []string{"root"}})
	for _, tc := range []struct {
		header      string
		pass, admin bool
	}{
		{"", false, false},
		{"Bearer user", true, false},
		{"Bearer root", true, true},
		{"Bearer nope", false, false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/console/api/snapshot", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		if pass := g.Check(r) == nil; pass != tc.pass {
			t.Errorf("%q: Check passes = %v, want %v", tc.header, pass, tc.pass)
		}
		if admin := g.Admin(r); admin != tc.admin {
			t.Errorf("%q: Admin = %v, want %v", tc.header, admin, tc.admin)
		}
	}
	if New(Config{Keys: []string{"user"}}).Admin(httptest.NewRequest(http.MethodGet, "/", nil)) {
		t.Error("no admin keys: nobody may be admin")
	}
}
