package consuldisc_test

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/discovery/consuldisc"
	"switchyard.dev/libs/mesh/discovery/disctest"
)

// An agent frozen for longer than the TTL (SIGSTOP, then SIGCONT) finds
// every heartbeat overdue when it resumes and marks all the checks
// critical at once, until the heartbeats that waited on it land. A watch
// must not pass that moment on: it never lists fewer than the instances
// that kept heartbeating. An instance that really died in the meantime
// (registered as the backend does, then never heartbeating again) still
// leaves the watch, once its lapse has lasted the window.
func TestAgentPauseKeepsWatches(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("freezes a real Consul agent for seconds")
	}
	c := deptest.StartConsul(t)
	const ttl = 2 * time.Second
	r, err := consuldisc.New(t.Context(), consuldisc.Config{
		Address: c.Addr, ServicePrefix: "pause-", CheckTTL: ttl,
		WatchWait: 2 * time.Second, MaxBackoff: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	live := []string{"decode-0", "decode-1", "decode-2", "decode-3", "decode-4"}
	for _, id := range live {
		if _, err := r.Register(t.Context(), disctest.Instance(id, discovery.RoleDecode)); err != nil {
			t.Fatal(err)
		}
	}
	registerDead(t, c.Addr, "pause-", "decode-dead", ttl)
	ch, err := r.Watch(t.Context(), discovery.RoleDecode)
	if err != nil {
		t.Fatal(err)
	}
	all := append(slices.Clone(live), "decode-dead")
	slices.Sort(all)
	waitIDs(t, ch, all)

	pid := consulPID(t, c.Addr)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	time.Sleep(2 * ttl)
	resume()

	// Every list from now on must hold the live instances, watched for as
	// long as the flap and the window could last (a TTL, the default
	// window of a heartbeat interval and a second, and a second more; an
	// observation period, not a timing assertion); the dead one must go
	// meanwhile or later.
	watchFor := time.After(ttl + ttl/3 + 2*time.Second)
	deadline := time.After(disctest.Wait)
	for dead, watched := true, false; dead || !watched; {
		select {
		case ins := <-ch:
			got := idsOf(ins)
			for _, id := range live {
				if !slices.Contains(got, id) {
					t.Fatalf("after the agent resumed the watch listed %v, without %s, which kept heartbeating", got, id)
				}
			}
			dead = slices.Contains(got, "decode-dead")
		case <-watchFor:
			watched = true
		case <-deadline:
			t.Fatalf("the dead instance was still listed %v after the agent resumed", disctest.Wait)
		}
	}
	// Whether the pause reproduced the flap: the agent logs each lapse.
	t.Logf("%d heartbeat checks lapsed (%d instances)", strings.Count(c.Log(), "Check missed TTL"), len(all))
}

// registerDead registers an instance the way the backend does (same
// service naming, meta and heartbeat check) and never heartbeats it: a
// process that died without deregistering.
func registerDead(t *testing.T, addr, prefix, id string, ttl time.Duration) {
	t.Helper()
	cfg := api.DefaultNonPooledConfig()
	cfg.Address = addr
	client, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	in := disctest.Instance(id, discovery.RoleDecode)
	host, port, _ := net.SplitHostPort(in.Address)
	p, _ := strconv.Atoi(port)
	err = client.Agent().ServiceRegister(&api.AgentServiceRegistration{
		ID: prefix + id, Name: prefix + in.Role, Address: host, Port: p,
		Meta: map[string]string{"switchyard_role": in.Role, "switchyard_version": in.Version, "switchyard_owner": "dead"},
		Check: &api.AgentServiceCheck{
			CheckID: "switchyard:" + id + ":dead", TTL: ttl.String(), Status: api.HealthPassing,
			DeregisterCriticalServiceAfter: "1m",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// consulPID finds the agent serving addr among this machine's processes
// by its -http-port argument (deptest keeps its process to itself).
func consulPID(t *testing.T, addr string) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	want := []byte("\x00-http-port\x00" + port + "\x00")
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || !bytes.Contains(b, want) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			return pid
		}
	}
	t.Skip("cannot find the Consul agent's process (no /proc?)")
	return 0
}

func idsOf(ins []discovery.Instance) []string {
	out := make([]string, 0, len(ins))
	for _, in := range ins {
		out = append(out, in.ID)
	}
	return out
}

func waitIDs(t *testing.T, ch <-chan []discovery.Instance, want []string) {
	t.Helper()
	timeout := time.After(disctest.Wait)
	for {
		select {
		case ins := <-ch:
			if slices.Equal(idsOf(ins), want) {
				return
			}
		case <-timeout:
			t.Fatalf("watch never showed %v", want)
		}
	}
}
