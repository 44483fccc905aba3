// Package deptest starts the real dependencies of integration tests (a
// Consul dev agent, a redis-server, a Nomad dev agent, versitygw) as child
// processes on free loopback ports, and stops them when the test ends.
// Eventually waits for what such tests wait on: state that another
// goroutine or process reaches by itself.
//
// Binaries are found through $CONSUL_BIN, $REDIS_BIN, $NOMAD_BIN and
// $VERSITYGW_BIN, then $PATH. When one is missing the test is skipped
// under -short and fails otherwise: `make test` installs them all, so a
// missing binary there is a broken set-up, not a reason to pass silently.
// Prometheus ($PROMETHEUS_BIN) and promtool ($PROMTOOL_BIN), which check
// deploy/ rather than the services, are optional: OptionalBinary skips
// without them unless SWITCHYARD_REQUIRE_SHARED=1.
package deptest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Binary finds a dependency's executable or skips/fails the test.
func Binary(t testing.TB, name, envVar string) string {
	t.Helper()
	if p := os.Getenv(envVar); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		t.Fatalf("%s=%q: no such file", envVar, p)
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if testing.Short() {
		t.Skipf("%s not found ($%s or PATH); skipped under -short", name, envVar)
	}
	t.Fatalf("%s not found ($%s or PATH): run `make test`, which installs it", name, envVar)
	return ""
}

// Process is a running dependency.
type Process struct {
	cmd    *exec.Cmd
	args   []string
	bin    string
	log    string
	t      testing.TB
	exited chan struct{} // closed when the current run ends
	env    []string      // added to the test process's environment
}

// Exited reports whether the current run of the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// startRetrying starts a dependency on fresh free ports until one run comes
// up: a port that was free when picked can be taken by a parallel test
// before the dependency binds it. up reports the run healthy; args builds
// the arguments for a set of ports.
func startRetrying(t testing.TB, bin, logPath string, args func() []string, up func(*Process) bool) *Process {
	t.Helper()
	return startEnv(t, bin, logPath, args, nil, up)
}

// startEnv is startRetrying with variables added to the environment.
func startEnv(t testing.TB, bin, logPath string, args func() []string, env []string, up func(*Process) bool) *Process {
	t.Helper()
	for attempt := 1; ; attempt++ {
		p := &Process{bin: bin, args: args(), log: logPath, t: t, env: env}
		p.Start()
		t.Cleanup(p.Stop)
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) && !p.Exited() {
			if up(p) {
				return p
			}
			time.Sleep(50 * time.Millisecond)
		}
		p.Stop()
		if attempt == 3 {
			t.Fatalf("%s did not come up in %d attempts; log:\n%s", bin, attempt, p.Log())
		}
	}
}

// Start (re)starts the process with its original arguments.
func (p *Process) Start() {
	p.t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatalf("log file: %v", err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if len(p.env) > 0 {
		cmd.Env = append(os.Environ(), p.env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.bin, err)
	}
	p.cmd = cmd
	exited := make(chan struct{})
	p.exited = exited
	go func() { _ = cmd.Wait(); f.Close(); close(exited) }()
}

// Stop kills the process (SIGKILL: the harshest restart) and waits for it.
func (p *Process) Stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	for range 500 {
		if syscall.Kill(p.cmd.Process.Pid, 0) != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.cmd = nil
}

// Log returns what the process printed, for failure messages.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// WaitTCP waits until addr accepts connections or the deadline passes.
func WaitTCP(ctx context.Context, addr string) error {
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not accepting connections: %w", addr, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Consul is a running `consul agent -dev`.
type Consul struct {
	*Process
	// Addr is the HTTP API address, host:port.
	Addr string
}

// StartConsul starts a dev agent on free loopback ports and waits until it
// has a leader.
func StartConsul(t testing.TB) *Consul {
	t.Helper()
	bin := Binary(t, "consul", "CONSUL_BIN")
	dir := t.TempDir()
	c := &Consul{}
	args := func() []string {
		ports := map[string]int{}
		for _, k := range []string{"http", "grpc", "grpc-tls", "serf-lan", "serf-wan", "server", "dns"} {
			ports[k] = FreePort(t)
		}
		c.Addr = "127.0.0.1:" + strconv.Itoa(ports["http"])
		return []string{"agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
			"-node", "switchyard-test", "-log-level", "warn",
			"-http-port", strconv.Itoa(ports["http"]), "-grpc-port", strconv.Itoa(ports["grpc"]), "-grpc-tls-port", strconv.Itoa(ports["grpc-tls"]),
			"-serf-lan-port", strconv.Itoa(ports["serf-lan"]), "-serf-wan-port", strconv.Itoa(ports["serf-wan"]),
			"-server-port", strconv.Itoa(ports["server"]), "-dns-port", strconv.Itoa(ports["dns"])}
	}
	c.Process = startRetrying(t, bin, filepath.Join(dir, "consul.log"), args, func(*Process) bool { return consulReady(c.Addr) })
	return c
}

// consulReady reports the agent has a raft leader and has registered its
// own node in the catalog: until then, creating a session (a leader lock)
// fails with "Missing node registration", on a loaded machine for a
// second or more after the leader is known.
func consulReady(addr string) bool {
	if !leaderKnown(addr) {
		return false
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	res, err := hc.Get("http://" + addr + "/v1/catalog/node/switchyard-test")
	if err != nil {
		return false
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 1<<16))
	return err == nil && res.StatusCode == http.StatusOK && bytes.Contains(body, []byte(`"switchyard-test"`))
}

// WaitLeader waits until the agent reports a raft leader.
func (c *Consul) WaitLeader(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if consulReady(c.Addr) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("consul at %s has no leader after 60s; log:\n%s", c.Addr, c.Log())
}

func leaderKnown(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(conn, "GET /v1/status/leader HTTP/1.0\r\nHost: %s\r\n\r\n", addr)
	r := bufio.NewReader(conn)
	status, err := r.ReadString('\n')
	if err != nil || len(status) < 12 || status[9:12] != "200" {
		return false
	}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return false
		}
		if line == "\r\n" {
			break
		}
	}
	body, _ := r.ReadString('\n')
	return len(body) > 4 // `""` means no leader; `"127.0.0.1:port"` means one
}

// Redis is a running redis-server.
type Redis struct {
	*Process
	// Addr is host:port.
	Addr string
}

// StartRedis starts a redis-server with persistence off on a free port.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	bin := Binary(t, "redis-server", "REDIS_BIN")
	dir := t.TempDir()
	r := &Redis{}
	args := func() []string {
		port := FreePort(t)
		r.Addr = "127.0.0.1:" + strconv.Itoa(port)
		return []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no", "--dir", dir}
	}
	r.Process = startRetrying(t, bin, filepath.Join(dir, "redis.log"), args, func(*Process) bool {
		c, err := net.DialTimeout("tcp", r.Addr, 200*time.Millisecond)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	return r
}

// Wait blocks until the server accepts connections.
func (r *Redis) Wait(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := WaitTCP(ctx, r.Addr); err != nil {
		t.Fatalf("redis: %v; log:\n%s", err, r.Log())
	}
}
