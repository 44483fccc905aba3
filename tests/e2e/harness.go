// Package e2e runs Switchyard the way operators do: real binaries as
// separate processes on loopback, with real Consul, checked from outside.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Services are all Switchyard services, in start order.
var Services = []string{"decode", "prefill", "router", "kvbm-controller", "planner", "frontend"}

// build is the one compilation of the service binaries a test process
// shares.
var build struct {
	once sync.Once
	dir  string
	err  error
}

// Build compiles every service binary, and the local supervisor, once per
// test process.
func Build(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "switchyard-e2e-bin")
		if build.err != nil {
			return
		}
		var ldflags []string
		for _, s := range Services {
			ldflags = append(ldflags, "-X", "switchyard.dev/services/"+s+".Version=0.0.0-e2e")
		}
		args := []string{"build", "-ldflags", strings.Join(ldflags, " "), "-o", build.dir + "/"}
		for _, s := range Services {
			args = append(args, "switchyard.dev/services/"+s+"/cmd/"+s)
		}
		args = append(args, "switchyard.dev/cmd/supervisor")
		cmd := exec.Command("go", args...)
		cmd.Dir = "../.."
		out, err := cmd.CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.dir
}

// Proc is one running service process.
type Proc struct {
	Name string
	Addr string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

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

// Start starts bin/<svc> with args plus -listen addr and waits for /health.
func Start(t testing.TB, bin, svc, addr string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: svc, Addr: addr, out: new(syncBuffer), done: make(chan struct{})}
	p.cmd = exec.Command(filepath.Join(bin, svc), append(args, "-listen", addr)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", svc, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.Kill() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		res, err := http.Get("http://" + addr + "/health")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return p
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited during start-up:\n%s", svc, p.out.String())
		case <-ctx.Done():
			t.Fatalf("%s not healthy within 60s:\n%s", svc, p.out.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Log is what the process printed.
func (p *Proc) Log() string { return p.out.String() }

// Signal sends sig and waits for the exit; it returns the exit code.
func (p *Proc) Signal(t testing.TB, sig syscall.Signal) int {
	t.Helper()
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not exit within 60s of %v:\n%s", p.Name, sig, p.Log())
	}
	return p.cmd.ProcessState.ExitCode()
}

// Kill stops the process hard (a crash).
func (p *Proc) Kill() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
