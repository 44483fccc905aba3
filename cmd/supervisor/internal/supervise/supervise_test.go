package supervise

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	supervisorv1 "switchyard.dev/gen/switchyard/supervisor/v1"

	"switchyard.dev/cmd/supervisor/internal/spec"
)

// The test binary is also the supervised process: with SUPERVISE_CHILD
// set it serves /health on its -port and, on SIGTERM, writes its -mark
// file and exits after -drain (or ignores SIGTERM with -stubborn).
func TestMain(m *testing.M) {
	if os.Getenv("SUPERVISE_CHILD") == "1" {
		child(os.Args[1:])
		return
	}
	os.Exit(m.Run())
}

func child(args []string) {
	var port, mark string
	stubborn, exitNow := false, false
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-port":
			i++
			port = args[i]
		case "-mark":
			i++
			mark = args[i]
		case "-stubborn":
			stubborn = true
		case "-exit":
			exitNow = true
		}
	}
	if exitNow {
		os.Exit(3)
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		os.Exit(4)
	}
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	}()
	for range term {
		if stubborn {
			continue
		}
		if mark != "" {
			_ = os.WriteFile(mark, []byte("drained"), 0o644)
		}
		os.Exit(0)
	}
}

// freePorts returns the first of n consecutive ports free on loopback.
func freePorts(t *testing.T, n int) int {
	t.Helper()
	for range 100 {
		base := 20000 + rand.IntN(30000)
		ok := true
		for i := range n {
			ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+i))
			if err != nil {
				ok = false
				break
			}
			_ = ln.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal("no free ports")
	return 0
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// stack runs a spec with a dependency pool and a scalable worker pool of
// two (at most four, at least one) until the test ends.
type stack struct {
	sv   *Supervisor
	out  *syncBuf
	dir  string
	stop context.CancelFunc
	done chan error
}

func startStack(t *testing.T, tune func(*spec.Spec)) *stack {
	t.Helper()
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dep, workers := freePorts(t, 1), freePorts(t, 4)
	js := fmt.Sprintf(`{"logs":%q,"stop_timeout":"5s","banner":"up\n","pools":[
		{"name":"dep","command":[%q,"-port","{port}"],"port":%d,"wait":true,"env":["SUPERVISE_CHILD=1"],
		 "ready":{"http":"http://127.0.0.1:{port}/","contains":"ok"}},
		{"name":"worker","command":[%q,"-port","{port}","-mark",%q],"port":%d,"count":2,"scalable":true,"min":1,"max":4,
		 "env":["SUPERVISE_CHILD=1"],"ready":{"http":"http://127.0.0.1:{port}/"}}]}`,
		filepath.Join(dir, "logs"), self, dep, self, filepath.Join(dir, "{id}.drained"), workers)
	s, err := spec.Parse([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(s)
	}
	st := &stack{out: &syncBuf{}, dir: dir, done: make(chan error, 1)}
	st.sv = New(s, st.out, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	st.stop = cancel
	go func() { st.done <- st.sv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-st.done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return st
}

// eventually polls cond for up to 30 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (st *stack) instances(pool string) []*supervisorv1.Instance { return st.sv.List(pool).Instances }

func (st *stack) allRunning(pool string, n int) func() bool {
	return func() bool {
		ins := st.instances(pool)
		if len(ins) != n {
			return false
		}
		for _, in := range ins {
			if in.State != supervisorv1.InstanceState_INSTANCE_STATE_RUNNING {
				return false
			}
		}
		return true
	}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// The stack starts in order, prints its banner once ready, and stops
// every process it started.
func TestStartAndStop(t *testing.T) {
	t.Parallel()
	st := startStack(t, nil)
	eventually(t, "banner", func() bool { return strings.Contains(st.out.String(), "up\n") })
	eventually(t, "two workers running", st.allRunning("worker", 2))
	var pids []int
	for _, in := range st.instances("") {
		pids = append(pids, int(in.Pid))
	}
	if ids := []string{st.instances("worker")[0].Id, st.instances("worker")[1].Id}; ids[0] != "worker-0" || ids[1] != "worker-1" {
		t.Errorf("worker ids %v", ids)
	}
	st.stop()
	if err := <-st.done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	st.done <- nil // for the cleanup
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d still alive after the stack stopped", pid)
		}
	}
	for _, id := range []string{"worker-0", "worker-1"} {
		if _, err := os.Stat(filepath.Join(st.dir, id+".drained")); err != nil {
			t.Errorf("%s was not drained with SIGTERM: %v", id, err)
		}
	}
}

// A crashed instance is restarted, keeps its name and port, and counts
// the restart; the others are untouched.
func TestCrashRestarted(t *testing.T) {
	t.Parallel()
	st := startStack(t, nil)
	eventually(t, "two workers running", st.allRunning("worker", 2))
	before := st.instances("worker")
	if err := syscall.Kill(int(before[1].Pid), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "worker-1 restarted", func() bool {
		ins := st.instances("worker")
		return len(ins) == 2 && ins[1].Restarts == 1 && ins[1].Pid != before[1].Pid &&
			ins[1].State == supervisorv1.InstanceState_INSTANCE_STATE_RUNNING
	})
	after := st.instances("worker")
	if after[1].Id != "worker-1" || after[1].Port != before[1].Port || !strings.Contains(after[1].LastExit, "killed") {
		t.Errorf("restarted instance %+v", after[1])
	}
	if after[0].Pid != before[0].Pid || after[0].Restarts != 0 {
		t.Errorf("worker-0 was touched: %+v", after[0])
	}
	if !strings.Contains(st.out.String(), "supervisor: worker-1 exited (signal: killed)") {
		t.Errorf("the crash was not reported:\n%s", st.out.String())
	}
}

// Remove drains an instance (SIGTERM, then gone, never restarted); Add
// takes the lowest free index; the bounds hold.
func TestScale(t *testing.T) {
	t.Parallel()
	st := startStack(t, nil)
	eventually(t, "two workers running", st.allRunning("worker", 2))
	in, err := st.sv.Remove("worker", "worker-0")
	if err != nil || in.State != supervisorv1.InstanceState_INSTANCE_STATE_DRAINING {
		t.Fatalf("Remove: %+v %v", in, err)
	}
	eventually(t, "worker-0 gone", func() bool { ins := st.instances("worker"); return len(ins) == 1 && ins[0].Id == "worker-1" })
	if _, err := os.Stat(filepath.Join(st.dir, "worker-0.drained")); err != nil {
		t.Errorf("worker-0 was not drained with SIGTERM: %v", err)
	}
	if _, err := st.sv.Remove("worker", ""); !errors.Is(err, ErrBounds) {
		t.Errorf("Remove below min: %v, want ErrBounds", err)
	}
	added, err := st.sv.Add("worker", 3)
	if err != nil || len(added) != 3 || added[0].Id != "worker-0" || added[2].Id != "worker-3" {
		t.Fatalf("Add: %+v %v", added, err)
	}
	eventually(t, "four workers running", st.allRunning("worker", 4))
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"above max", func() error { _, err := st.sv.Add("worker", 1); return err }(), ErrBounds},
		{"fixed pool", func() error { _, err := st.sv.Add("dep", 1); return err }(), ErrNotScalable},
		{"unknown pool", func() error { _, err := st.sv.Remove("nope", ""); return err }(), ErrUnknownPool},
		{"unknown instance", func() error { _, err := st.sv.Remove("worker", "worker-9"); return err }(), ErrNoInstance},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, tc.err, tc.want)
		}
	}
}

// An instance that ignores SIGTERM is killed once the stop timeout has
// passed.
func TestStopTimeoutKills(t *testing.T) {
	t.Parallel()
	st := startStack(t, func(s *spec.Spec) {
		s.StopTimeout = spec.Duration(300 * time.Millisecond)
		s.Pools[1].Command = append(s.Pools[1].Command, "-stubborn")
	})
	eventually(t, "two workers running", st.allRunning("worker", 2))
	pid := int(st.instances("worker")[0].Pid)
	if _, err := st.sv.Remove("worker", "worker-0"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the stubborn worker killed", func() bool { return !alive(pid) && len(st.instances("worker")) == 1 })
}

// A process that exits while the stack starts stops the start, with the
// instance and its log named.
func TestStartupFailure(t *testing.T) {
	t.Parallel()
	st := startStack(t, func(s *spec.Spec) { s.Pools[1].Command = append(s.Pools[1].Command, "-exit") })
	err := <-st.done
	st.done <- nil
	if err == nil || !strings.Contains(err.Error(), "worker-0 exited while starting (exit status 3)") || !strings.Contains(err.Error(), "worker-0.log") {
		t.Fatalf("Run: %v", err)
	}
	if ins := st.instances(""); len(ins) != 0 {
		t.Errorf("instances left after a failed start: %v", ins)
	}
}

// Restart waits stay below a ceiling that doubles from backoffBase to
// backoffMax, and spread over it.
func TestRestartWait(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for n, ceiling := range map[int]time.Duration{1: backoffBase, 2: 2 * backoffBase, 3: 4 * backoffBase, 40: backoffMax} {
		lo, hi := ceiling, time.Duration(0)
		for range 200 {
			got := restartWait(n, r)
			if got < 0 || got > ceiling {
				t.Fatalf("restartWait(%d) = %v, outside [0, %v]", n, got, ceiling)
			}
			lo, hi = min(lo, got), max(hi, got)
		}
		if lo > ceiling/4 || hi < ceiling*3/4 {
			t.Errorf("restartWait(%d) over 200 draws spans [%v, %v]; want most of [0, %v]", n, lo, hi, ceiling)
		}
	}
}
