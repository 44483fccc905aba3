package app

import (
	"bytes"
	"context"
	"encoding/json"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"switchyard.dev/libs/mesh/meshtest"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

// A plain grpc-go client (go-grpc-middleware interceptors) can call the
// service: health, reflection and InfoService.
func TestGRPCConformance(t *testing.T) {
	t.Parallel()
	r := meshtest.Start(t, Spec("v0.0.0-test", nil), "-listen", "127.0.0.1:0", "-discovery", "none", "-router-url", "http://127.0.0.1:1")
	meshtest.CheckGRPC(t, r.Addr, "frontend")
}

// The whole service, started as main starts it, serves the OpenAI API
// through a router (no discovery) and exposes its metrics.
func TestServiceEndToEnd(t *testing.T) {
	t.Parallel()
	router := upstreamtest.StartRouter(t, upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w1"}))
	env := func(k string) string {
		if k == "SWITCHYARD_API_KEYS" {
			return "sk-1"
		}
		return ""
	}
	r := meshtest.Start(t, Spec("v0.0.0-test", env), "-listen", "127.0.0.1:0", "-discovery", "none", "-router-url", router.URL, "-rate-limit", "100")
	body := `{"model":"tiny","messages":[{"role":"user","content":"Hi"}],"max_tokens":5}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, r.URL()+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct{ Message struct{ Content string } }
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || len(out.Choices[0].Message.Content) != 5 {
		t.Fatalf("status %d out %+v err %v", resp.StatusCode, out, err)
	}
	models := get(t, r.URL()+"/v1/models", "sk-1")
	if !strings.Contains(models, `"id":"tiny"`) {
		t.Fatalf("models: %s", models)
	}
	metrics := get(t, r.URL()+"/metrics", "")
	for _, m := range []string{`switchyard_frontend_requests_total{endpoint="chat_completions",status="200"} 1`, "switchyard_frontend_time_to_first_token_seconds_bucket"} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %q", m)
		}
	}
	if h := get(t, r.URL()+"/health", ""); !strings.Contains(h, `"status":"ok"`) {
		t.Errorf("health: %s", h)
	}
}

func get(t *testing.T, url, key string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestFlags(t *testing.T) {
	t.Parallel()
	keys := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keys, []byte("k\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"-rate-limit", "-1"}, 2},
		{[]string{"-rate-burst", "-1"}, 2},
		{[]string{"-max-body-bytes", "0"}, 2},
		{[]string{"-migration-attempts", "-1"}, 2},
		{[]string{"-request-timeout", "-1s"}, 2},
		{[]string{"-chat-template", "jinja"}, 2},
		{[]string{"-chat-template", "m=" + filepath.Join(t.TempDir(), "missing.jinja")}, 2},
		{[]string{"-router-url", "grpc://x"}, 2},
		{[]string{"-api-keys-file", filepath.Join(t.TempDir(), "missing")}, 2},
		{[]string{"-api-keys-file", keys, "-version"}, 0},
		{[]string{"-discovery", "none", "-listen", "127.0.0.1:0"}, 1}, // no router source
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			if code := Main(context.Background(), "test", tc.args, &out, &out, nil); code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, out.String())
			}
		})
	}
}

// Imports flow one way: this module may use gen/, libs/ and its own
// packages, never another service.
func TestImportDirection(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(p, "switchyard.dev/services/") && p != "switchyard.dev/services/frontend" && !strings.HasPrefix(p, "switchyard.dev/services/frontend/") {
				t.Errorf("%s imports %s", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
