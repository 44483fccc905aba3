package deptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Nomad is a running `nomad agent -dev`: one server and one client on
// loopback, registering with a Consul agent, with the raw_exec and exec
// drivers (tests run as root).
type Nomad struct {
	*Process
	// Addr is the HTTP API's base URL, e.g. http://127.0.0.1:4646.
	Addr string
	// Dir is the agent's data_dir (allocation directories live below it).
	Dir string
}

// nomadStopTimeout bounds a graceful stop: the dev agent stops every
// allocation (each task gets its kill_timeout) before it exits.
const nomadStopTimeout = 60 * time.Second

// StartNomad starts a Nomad v1.6 dev agent on free loopback ports that
// registers with the Consul agent at consulAddr (host:port, e.g.
// StartConsul's Addr), and waits until its node is ready with raw_exec
// healthy. The binary comes from $NOMAD_BIN or PATH (`scripts/deps.sh
// nomad` builds it from tools/nomad), with Consul's skip/fail policy.
//
// Start Consul first: cleanups run last-in first-out, so Nomad then stops
// before Consul (the other order makes Nomad's exit take ~48 s). Nomad is
// stopped with SIGINT, so the dev agent stops its allocations (a SIGKILL
// would leave raw_exec tasks running), then killed if it has not exited
// within a minute.
func StartNomad(t testing.TB, consulAddr string) *Nomad {
	t.Helper()
	bin := Binary(t, "nomad", "NOMAD_BIN")
	dir := t.TempDir()
	n := &Nomad{Dir: filepath.Join(dir, "data")}
	cfg := filepath.Join(dir, "agent.hcl")
	args := func() []string {
		http, rpc, serf := FreePort(t), FreePort(t), FreePort(t)
		n.Addr = "http://127.0.0.1:" + strconv.Itoa(http)
		if err := os.WriteFile(cfg, []byte(nomadConfig(n.Dir, consulAddr, http, rpc, serf)), 0o644); err != nil {
			t.Fatalf("nomad config: %v", err)
		}
		return []string{"agent", "-dev", "-bind", "127.0.0.1", "-config", cfg}
	}
	n.Process = startRetrying(t, bin, filepath.Join(dir, "nomad.log"), args, func(*Process) bool { return n.ready() })
	t.Cleanup(n.Stop) // after startRetrying's SIGKILL cleanup, so it runs before it
	return n
}

// nomadConfig is the agent's configuration file. -dev already enables a
// server, a client and raw_exec; the file moves the ports and data off the
// defaults so parallel tests do not collide.
func nomadConfig(dataDir, consulAddr string, http, rpc, serf int) string {
	return fmt.Sprintf(`
name      = "switchyard-test"
data_dir  = %q
log_level = "INFO"
ports {
  http = %d
  rpc  = %d
  serf = %d
}
consul {
  address = %q
}
client {
  enabled = true
}
plugin "raw_exec" {
  config {
    enabled = true
  }
}
`, dataDir, http, rpc, serf, consulAddr)
}

// ready reports whether the agent's node is ready and raw_exec healthy.
func (n *Nomad) ready() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var nodes []struct {
		Status  string
		Drivers map[string]struct{ Detected, Healthy bool }
	}
	if err := n.Do(ctx, http.MethodGet, "/v1/nodes?resources=false", nil, &nodes); err != nil {
		return false
	}
	for _, node := range nodes {
		if d := node.Drivers["raw_exec"]; node.Status == "ready" && d.Detected && d.Healthy {
			return true
		}
	}
	return false
}

// Stop stops the agent with SIGINT and waits until it has exited, killing
// it after a minute. It is safe to call more than once.
func (n *Nomad) Stop() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-n.exited:
	case <-time.After(nomadStopTimeout):
		n.t.Logf("nomad did not exit within %v of SIGINT; killing it and its tasks", nomadStopTimeout)
		n.Process.Stop()
		sweep(n.Dir)
	}
	n.Process.Stop()
}

// sweep removes what a killed agent leaves behind under its data
// directory dir: processes (task executors and raw_exec tasks run in
// sessions of their own, outside the agent's process group, with dir in
// their command line or as their working directory), then the tmpfs
// mounts of the tasks' secrets and private directories, which would make
// the test's TempDir cleanup fail.
func sweep(dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(p, "cmdline"))
		cwd, _ := os.Readlink(filepath.Join(p, "cwd"))
		if strings.Contains(string(cmdline), dir) || strings.HasPrefix(cwd, dir+"/") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	for _, line := range strings.Split(string(mounts), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], dir+"/") {
			_ = syscall.Unmount(f[1], syscall.MNT_DETACH)
		}
	}
}

// Do calls Nomad's HTTP API: in (if not nil) is sent as JSON, out (if not
// nil) receives the JSON answer. A status other than 2xx is an error
// carrying Nomad's message.
func (n *Nomad) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, n.Addr+path, body)
	if err != nil {
		return err
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("nomad %s %s: %s: %s", method, path, res.Status, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}
