package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/meshtest"
)

// Every service, as a real process with -discovery consul, registers and
// shows as passing in a real Consul, answers gRPC health, reflection and
// InfoService through a plain grpc-go client, and disappears from Consul on
// SIGTERM with exit code 0.
func TestMeshInConsul(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every service; skipped under -short")
	}
	bin := Build(t)
	consul := deptest.StartConsul(t)
	client, err := api.NewClient(&api.Config{Address: consul.Addr})
	if err != nil {
		t.Fatal(err)
	}
	common := []string{"-discovery", "consul", "-consul-addr", consul.Addr, "-drain-timeout", "2s"}
	procs := map[string]*Proc{}
	for _, svc := range Services {
		addr := fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(t))
		args := append([]string{"-id", svc + "-e2e"}, common...)
		if svc == "decode" || svc == "prefill" {
			args = append(args, "-executor", "sim")
		}
		procs[svc] = Start(t, bin, svc, addr, args...)
	}
	for _, svc := range Services {
		waitConsul(t, client, svc, true)
		meshtest.CheckGRPC(t, procs[svc].Addr, svc)
	}
	for _, svc := range Services {
		if code := procs[svc].Signal(t, syscall.SIGTERM); code != 0 {
			t.Errorf("%s exited %d after SIGTERM:\n%s", svc, code, procs[svc].Log())
		}
		waitConsul(t, client, svc, false)
	}
}

func waitConsul(t *testing.T, c *api.Client, role string, present bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		entries, _, err := c.Health().Service("switchyard-"+role, "", true, nil)
		if err == nil && (len(entries) == 1) == present {
			if present && entries[0].Service.Meta["switchyard_version"] != "0.0.0-e2e" {
				t.Fatalf("%s registered with meta %v", role, entries[0].Service.Meta)
			}
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: passing in Consul = %v not reached within 30s", role, !present)
}

// A bad setting fails fast with one line naming the flag and value.
func TestBadFlagsFailFast(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every service; skipped under -short")
	}
	bin := Build(t)
	for _, svc := range Services {
		out, err := exec.Command(bin+"/"+svc, "-discovery", "consul", "-consul-addr", "127.0.0.1:1").CombinedOutput()
		if err == nil || !strings.Contains(string(out), `-consul-addr="127.0.0.1:1"`) {
			t.Errorf("%s with unreachable consul: err=%v out=%s", svc, err, out)
		}
		out, err = exec.Command(bin+"/"+svc, "-listen", "not-an-address").CombinedOutput()
		if err == nil || !strings.Contains(string(out), `-listen="not-an-address"`) {
			t.Errorf("%s with bad -listen: err=%v out=%s", svc, err, out)
		}
	}
}
