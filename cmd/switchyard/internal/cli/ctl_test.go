package cli

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/deptest"
)

// `switchyard ctl instances` against a running one-process mesh lists
// its services, the worker with its load and KV tiers; a drain without
// an admin key is refused.
func TestCtlAgainstMesh(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a mesh")
	}
	var mu sync.Mutex
	addrs := map[string]net.Addr{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	var logs syncBuffer
	keys, admin := filepath.Join(t.TempDir(), "keys"), filepath.Join(t.TempDir(), "admin")
	if err := os.WriteFile(keys, []byte("user\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(admin, []byte("root\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		done <- Run(ctx, Env{
			Args: []string{"-discovery-dir", t.TempDir(), "-listen", "127.0.0.1:0", "-drain-timeout", "1s",
				"decode", "-id", "decode-a", "--", "router", "-id", "router-a", "--", "frontend", "-id", "frontend-a", "-console-interval", "100ms",
				"-api-keys-file", keys, "-admin-keys-file", admin},
			Stdout: &logs, Stderr: &logs,
			Ready: func(name string, a net.Addr) { mu.Lock(); addrs[name] = a; mu.Unlock() },
		})
	}()
	var front string
	deptest.Eventually(t, 30*time.Second, "three services serving", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if a, ok := addrs["frontend"]; ok && len(addrs) == 3 {
			front = "http://" + a.String()
			return true
		}
		return false
	})
	ctlAs := func(key string, args ...string) (int, string, string) {
		var out, errOut syncBuffer
		code := Run(t.Context(), Env{Args: append([]string{"ctl", "-url", front, "-key", key}, args...), Stdout: &out, Stderr: &errOut})
		return code, out.String(), errOut.String()
	}
	ctl := func(args ...string) (int, string, string) { return ctlAs("user", args...) }
	var out string
	deptest.Eventually(t, 30*time.Second, "ctl lists the mesh", func() bool {
		var code int
		code, out, _ = ctl("instances")
		return code == exitOK && strings.Contains(out, "frontend-a") && strings.Contains(out, "router-a") &&
			strings.Contains(out, "decode-a") && strings.Contains(out, "device=")
	})
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "decode-a") && !strings.Contains(line, "passing") {
			t.Errorf("decode-a not passing: %q", line)
		}
	}
	if code, out, _ := ctl("instances", "-role", "router"); code != exitOK || strings.Contains(out, "decode-a") {
		t.Errorf("instances -role router: exit %d:\n%s", code, out)
	}
	if code, _, errOut := ctl("drain", "decode-a"); code != 1 || !strings.Contains(errOut, "admin") {
		t.Errorf("drain without an admin key: exit %d, stderr %q; want 1 and a refusal", code, errOut)
	}

	// A completion leaves its prompt's blocks cached: the router's index
	// shows them, clearing the worker's cache empties both.
	body := `{"model": "tiny-random", "prompt": "` + strings.Repeat("once upon a time ", 8) + `", "max_tokens": 2}`
	deptest.Eventually(t, 30*time.Second, "a completion served", func() bool {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, front+"/v1/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer user")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			time.Sleep(50 * time.Millisecond)
			return false
		}
		return true
	})
	deptest.Eventually(t, 30*time.Second, "the router's index holding the prompt's blocks", func() bool {
		code, out, _ := ctl("index", "decode-a")
		return code == exitOK && strings.Contains(out, "router-a: ") && !strings.Contains(out, "router-a: 0 blocks") && strings.Contains(out, "device=")
	})
	if code, _, errOut := ctl("clear-cache", "decode-a"); code != 1 || !strings.Contains(errOut, "admin") {
		t.Errorf("clear-cache without an admin key: exit %d, stderr %q; want 1 and a refusal", code, errOut)
	}
	if code, out, errOut := ctlAs("root", "clear-cache", "decode-a"); code != exitOK || !strings.Contains(out, "cleared decode-a") || !strings.Contains(out, " 0 in use") {
		t.Errorf("clear-cache: exit %d, %q %q", code, out, errOut)
	}
	deptest.Eventually(t, 30*time.Second, "the router's index emptied", func() bool {
		code, out, _ := ctl("index", "decode-a")
		return code == exitOK && strings.Contains(out, "router-a: 0 blocks")
	})
	if code, out, _ := ctl("index", "nobody"); code != exitOK || !strings.Contains(out, "router-a: does not follow nobody") {
		t.Errorf("index of an unknown worker: exit %d %q", code, out)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d after shutdown; want 0\n%s", code, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("services did not stop")
	}
}
