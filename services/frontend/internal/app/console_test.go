package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"switchyard.dev/libs/mesh/meshtest"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

func TestConsoleFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-console-interval", "0s"},
		{"-console-timeout", "-1s"},
		{"-console-concurrency", "0"},
		{"-supervisor-url", "unix:///x"},
	} {
		var out bytes.Buffer
		if code := Main(context.Background(), "test", args, &out, &out, nil); code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, out.String())
		}
	}
}

// The frontend serves the console: the page to anyone, the data with an
// API key, and the admin role only to admin keys.
func TestConsoleServed(t *testing.T) {
	t.Parallel()
	router := upstreamtest.StartRouter(t, upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w1"}))
	env := func(k string) string {
		switch k {
		case "SWITCHYARD_API_KEYS":
			return "sk-1"
		case "SWITCHYARD_ADMIN_KEYS":
			return "sk-admin"
		}
		return ""
	}
	r := meshtest.Start(t, Spec("v0.0.0-test", env), "-listen", "127.0.0.1:0", "-discovery", "none", "-router-url", router.URL,
		"-console-interval", "50ms")
	if page := get(t, r.URL()+"/console/", ""); !strings.Contains(page, "Switchyard console") {
		t.Errorf("page: %.200s", page)
	}
	if s := get(t, r.URL()+"/console/api/snapshot", ""); !strings.Contains(s, "invalid_request_error") && !strings.Contains(s, "API key") {
		t.Errorf("snapshot without key: %.200s", s)
	}
	if s := get(t, r.URL()+"/console/api/snapshot", "sk-1"); !strings.Contains(s, `"instances":[]`) {
		t.Errorf("snapshot: %.200s", s)
	}
	if w := get(t, r.URL()+"/console/api/whoami", "sk-admin"); !strings.Contains(w, `"admin":true`) {
		t.Errorf("whoami as admin: %s", w)
	}
	if w := get(t, r.URL()+"/console/api/whoami", "sk-1"); !strings.Contains(w, `"admin":false`) {
		t.Errorf("whoami as user: %s", w)
	}
}
