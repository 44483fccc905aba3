package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/deptest"
)

func TestParse(t *testing.T) {
	t.Parallel()
	shared := []string{"-discovery-dir", "/d"}
	tests := []struct {
		name string
		args []string
		want []Group
		err  string
	}{
		{"one", []string{"router"}, []Group{{"router", []string{}}}, ""},
		{"shared flags go first", []string{"-discovery-dir", "/d", "router", "-mode", "kv"},
			[]Group{{"router", []string{"-discovery-dir", "/d", "-mode", "kv"}}}, ""},
		{"groups", []string{"-discovery-dir", "/d", "decode", "-listen", ":1", "--", "decode", "-listen", ":2", "--", "frontend"},
			[]Group{{"decode", append(shared, "-listen", ":1")}, {"decode", append(shared, "-listen", ":2")}, {"frontend", shared}}, ""},
		{"all", []string{"-log-level", "debug", "all"}, []Group{
			{"decode", []string{"-log-level", "debug"}}, {"router", []string{"-log-level", "debug"}},
			{"kvbm-controller", []string{"-log-level", "debug"}}, {"planner", []string{"-log-level", "debug"}},
			{"frontend", []string{"-log-level", "debug"}}}, ""},
		{"all and more", []string{"all", "--", "prefill"}, []Group{
			{"decode", []string{}}, {"router", []string{}}, {"kvbm-controller", []string{}}, {"planner", []string{}},
			{"frontend", []string{}}, {"prefill", []string{}}}, ""},
		{"no service", []string{"-log-level", "debug"}, nil, "no service named"},
		{"unknown first", []string{"routr", "router"}, nil, `unknown service "routr"`},
		{"unknown after --", []string{"router", "--", "routr"}, nil, `unknown service "routr" after --`},
		{"trailing --", []string{"router", "--"}, nil, "-- at the end"},
		{"all with flags", []string{"all", "-mode", "kv"}, nil, "all takes no flags"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse(tt.args)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Parse(%q) error = %v; want one containing %q", tt.args, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				if got[i].Args == nil {
					got[i].Args = []string{}
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse(%q) =\n %q\nwant\n %q", tt.args, got, tt.want)
			}
		})
	}
}

func TestBadFlagStartsNothing(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	started := false
	code := Run(t.Context(), Env{
		Args:   []string{"-discovery", "none", "router", "-listen", "127.0.0.1:0", "--", "decode", "-no-such-flag"},
		Stdout: &bytes.Buffer{}, Stderr: &stderr,
		Ready: func(string, net.Addr) { started = true },
	})
	if code != exitUsage || started {
		t.Fatalf("exit %d, a service started: %v; want %d and none (stderr: %s)", code, started, exitUsage, stderr.String())
	}
	if !strings.Contains(stderr.String(), "no-such-flag") {
		t.Errorf("stderr does not name the bad flag: %s", stderr.String())
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if code := Run(t.Context(), Env{Args: []string{"version"}, Stdout: &out, Stderr: &out}); code != exitOK {
		t.Fatalf("exit %d: %s", code, out.String())
	}
	for _, s := range specs {
		if !strings.Contains(out.String(), s.name) {
			t.Errorf("version lists no %s: %s", s.name, out.String())
		}
	}
}

// A mesh of three services in one process serves a completion end to end,
// then stops cleanly when its context ends.
func TestOneProcessMesh(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a mesh")
	}
	var mu sync.Mutex
	addrs := map[string]net.Addr{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	var logs syncBuffer
	go func() {
		done <- Run(ctx, Env{
			Args: []string{"-discovery-dir", t.TempDir(), "-listen", "127.0.0.1:0", "-drain-timeout", "1s",
				"decode", "--", "router", "--", "frontend"},
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
	var model string
	deptest.Eventually(t, 30*time.Second, "a model listed", func() bool {
		resp, err := http.Get(front + "/v1/models")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var list struct {
			Data []struct{ ID string } `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&list) != nil || len(list.Data) == 0 {
			return false
		}
		model = list.Data[0].ID
		return true
	})
	body := `{"model":"` + model + `","prompt":"Once upon a time","max_tokens":4,"temperature":0}`
	var out struct {
		Choices []struct{ Text string }
		Usage   struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	deptest.Eventually(t, 30*time.Second, "a completion", func() bool {
		resp, err := http.Post(front+"/v1/completions", "application/json", strings.NewReader(body))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&out) == nil
	})
	if len(out.Choices) != 1 || out.Usage.CompletionTokens != 4 {
		t.Errorf("completion = %+v; want one choice of 4 tokens", out)
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

// syncBuffer is a bytes.Buffer that several services may write at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
