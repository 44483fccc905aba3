package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	supervisorv1 "switchyard.dev/gen/switchyard/supervisor/v1"
	"switchyard.dev/gen/switchyard/supervisor/v1/supervisorv1connect"
	"switchyard.dev/libs/mesh/deptest"
)

// consecutivePorts returns the first of n consecutive free loopback ports.
func consecutivePorts(t *testing.T, n int) int {
	t.Helper()
	for range 50 {
		base := deptest.FreePort(t)
		ok := true
		for i := 1; i < n && ok; i++ {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if ok = err == nil; ok {
				_ = ln.Close()
			}
		}
		if ok {
			return base
		}
	}
	t.Fatal("no run of free ports")
	return 0
}

// supervised is a mesh under the local supervisor, as `make run` starts
// it: two decode workers (a scalable pool of at most three), a router and
// a frontend.
type supervised struct {
	proc *Proc
	api  supervisorv1connect.SupervisorServiceClient
	mesh *Mesh // Frontend only: for the OpenAI client
}

func startSupervised(t *testing.T, workerArgs ...string) *supervised {
	t.Helper()
	return startSupervisedWith(t, nil, workerArgs...)
}

// startSupervisedWith is startSupervised with flags for the frontend; it
// is told the supervisor's address with -supervisor-url.
func startSupervisedWith(t *testing.T, frontendArgs []string, workerArgs ...string) *supervised {
	t.Helper()
	bin, dir := Build(t), t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(t))
	frontendArgs = append([]string{"-supervisor-url", "http://" + addr}, frontendArgs...)
	common := []string{"-discovery", "file", "-discovery-dir", filepath.Join(dir, "discovery"), "-drain-timeout", "5s"}
	decode, router, frontend := consecutivePorts(t, 3), deptest.FreePort(t), deptest.FreePort(t)
	ready := map[string]any{"http": "http://127.0.0.1:{port}/health"}
	cmd := func(svc string, args ...string) []string {
		return append(append([]string{filepath.Join(bin, svc)}, common...), append(args, "-id", "{id}", "-listen", "127.0.0.1:{port}")...)
	}
	spec := map[string]any{"logs": filepath.Join(dir, "logs"), "stop_timeout": "10s", "banner": "stack up\n", "pools": []map[string]any{
		{"name": "decode", "count": 2, "scalable": true, "min": 1, "max": 3, "port": decode, "ready": ready, "command": cmd("decode", workerArgs...)},
		{"name": "router", "port": router, "ready": ready, "command": cmd("router", "-mode", "round-robin")},
		{"name": "frontend", "port": frontend, "ready": ready, "command": cmd("frontend", frontendArgs...)},
	}}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "stack.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := &supervised{proc: Start(t, bin, "supervisor", addr, "-spec", path)}
	s.api = supervisorv1connect.NewSupervisorServiceClient(http.DefaultClient, "http://"+addr)
	s.mesh = &Mesh{Frontend: &Proc{Addr: fmt.Sprintf("127.0.0.1:%d", frontend)}}
	deptest.Eventually(t, 60*time.Second, "the stack up", func() bool { return strings.Contains(s.proc.Log(), "stack up") })
	return s
}

func (s *supervised) decode(t *testing.T) []*supervisorv1.Instance {
	t.Helper()
	res, err := s.api.ListInstances(t.Context(), connect.NewRequest(&supervisorv1.ListInstancesRequest{Pool: "decode"}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg.Instances
}

// Under the supervisor, a decode worker killed during 40 greedy streams
// is restarted (same name and port, the restart counted) and every stream
// completes with the undisturbed text; then draining a worker through the
// API during streams loses none either, and the pool shrinks by one.
func TestSupervisorRestartsAndDrains(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped under -short")
	}
	model, tok := StoriesModel(t)
	s := startSupervised(t, "-executor", "llama", "-model", model, "-tokenizer", tok)
	c := client(s.mesh)
	id := waitModel(t, c)
	waitServing(t, c, id)
	const streams, maxTokens = 40, 96
	prompts := make([]string, streams)
	for i := range prompts {
		prompts[i] = fmt.Sprintf("Once upon a time, a cat named %d", i)
	}
	want, _ := runStreams(t, c, id, prompts, maxTokens, nil)

	victim := s.decode(t)[0]
	var killed atomic.Bool
	got, usage := runStreams(t, c, id, prompts, maxTokens, func(total int) {
		if total >= streams*4 && killed.CompareAndSwap(false, true) {
			_ = syscall.Kill(int(victim.Pid), syscall.SIGKILL)
		}
	})
	check := func(phase string, got []string, usage []int64) {
		t.Helper()
		for i := range prompts {
			if got[i] != want[i] || usage[i] != maxTokens {
				t.Errorf("%s: stream %d: %q (%d tokens), want %q (%d)", phase, i, got[i], usage[i], want[i], maxTokens)
			}
		}
	}
	check("after a kill", got, usage)
	if n := metricSum(t, "http://"+s.mesh.Frontend.Addr+"/metrics", "switchyard_frontend_migrations_total"); n < 1 {
		t.Fatalf("migrations_total = %v: the killed worker carried no stream, so nothing was tested", n)
	}
	deptest.Eventually(t, 60*time.Second, "the killed worker restarted", func() bool {
		for _, in := range s.decode(t) {
			if in.Id == victim.Id {
				return in.Restarts == 1 && in.Pid != victim.Pid && in.Port == victim.Port &&
					in.State == supervisorv1.InstanceState_INSTANCE_STATE_RUNNING
			}
		}
		return false
	})

	var drained atomic.Bool
	got, usage = runStreams(t, c, id, prompts, maxTokens, func(total int) {
		if total >= streams*4 && drained.CompareAndSwap(false, true) {
			go func() {
				if _, err := s.api.RemoveInstance(t.Context(), connect.NewRequest(&supervisorv1.RemoveInstanceRequest{Pool: "decode", Id: "decode-1"})); err != nil {
					t.Errorf("RemoveInstance: %v", err)
				}
			}()
		}
	})
	check("during a drain", got, usage)
	deptest.Eventually(t, 60*time.Second, "decode-1 drained", func() bool { ins := s.decode(t); return len(ins) == 1 && ins[0].Id == "decode-0" })
	// And the pool grows back through the API.
	if _, err := s.api.AddInstances(t.Context(), connect.NewRequest(&supervisorv1.AddInstancesRequest{Pool: "decode", Count: 1})); err != nil {
		t.Fatal(err)
	}
	got, usage = runStreams(t, c, id, prompts, maxTokens, nil)
	check("after growing back", got, usage)
}
