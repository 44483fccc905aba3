package meshtest

import (
	"bytes"
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/service"
)

// Running is a service started in-process by Start.
type Running struct {
	Addr   string
	cancel context.CancelFunc
	done   chan int
	logMu  sync.Mutex
	log    *bytes.Buffer
}

type lockedWriter struct{ r *Running }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.r.logMu.Lock()
	defer w.r.logMu.Unlock()
	return w.r.log.Write(p)
}

// Start runs spec with args in-process until the test ends, and waits until
// it serves.
func Start(t testing.TB, spec service.Spec, args ...string) *Running {
	t.Helper()
	return StartEnv(t, spec, service.Env{}, args...)
}

// StartEnv is Start with more of the service's environment (Getenv,
// SpanProcessor); Args, Stdout, Stderr and Ready are Start's own.
func StartEnv(t testing.TB, spec service.Spec, env service.Env, args ...string) *Running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{cancel: cancel, done: make(chan int, 1), log: new(bytes.Buffer)}
	ready := make(chan net.Addr, 1)
	go func() {
		env.Args, env.Stdout, env.Stderr = args, lockedWriter{r}, lockedWriter{r}
		env.Ready = func(a net.Addr) { ready <- a }
		r.done <- service.Run(ctx, spec, env)
	}()
	select {
	case a := <-ready:
		r.Addr = a.String()
	case code := <-r.done:
		cancel()
		t.Fatalf("%s exited with %d before serving:\n%s", spec.Role, code, r.Log())
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("%s did not start within 60s:\n%s", spec.Role, r.Log())
	}
	t.Cleanup(func() { r.Stop(t) })
	return r
}

// Log returns what the service logged so far.
func (r *Running) Log() string {
	r.logMu.Lock()
	defer r.logMu.Unlock()
	return r.log.String()
}

// URL is the service's base URL.
func (r *Running) URL() string { return "http://" + r.Addr }

// Stop shuts the service down gracefully and returns its exit code.
func (r *Running) Stop(t testing.TB) int {
	r.cancel()
	select {
	case code := <-r.done:
		r.done <- code
		return code
	case <-time.After(60 * time.Second):
		t.Errorf("service did not stop within 60s:\n%s", r.Log())
		return -1
	}
}
