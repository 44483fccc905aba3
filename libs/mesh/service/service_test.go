package service_test

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/discovery/disctest"
	"switchyard.dev/libs/mesh/discovery/filedisc"
	"switchyard.dev/libs/mesh/meshtest"
	"switchyard.dev/libs/mesh/service"
)

func spec() service.Spec {
	return service.Spec{Role: "planner", Version: "v0.0.1-test", DefaultListen: "127.0.0.1:0"}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// Two instances in one process, each with its own metrics, health and
// registration: nothing global is shared.
func TestTwoInstancesRegisterServeAndDeregister(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := meshtest.Start(t, spec(), "-discovery-dir", dir, "-id", "planner-a", "-tags", "canary")
	b := meshtest.Start(t, spec(), "-discovery-dir", dir, "-id", "planner-b")
	reg, err := filedisc.New(filedisc.Config{Dir: dir, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ins := disctest.Eventually(t, reg, discovery.RolePlanner, disctest.HasIDs("planner-a", "planner-b"), "both registered")
	if !ins[0].HasTag("canary") || ins[0].Version != "v0.0.1-test" || ins[0].Address != a.Addr {
		t.Fatalf("record = %+v", ins[0])
	}
	for _, r := range []*meshtest.Running{a, b} {
		meshtest.CheckGRPC(t, r.Addr, "planner")
		if code, body := get(t, r.URL()+"/health"); code != 200 || !strings.Contains(body, "v0.0.1-test") {
			t.Fatalf("/health = %d %s", code, body)
		}
		if code, body := get(t, r.URL()+"/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
			t.Fatalf("/metrics = %d", code)
		}
	}
	// the metrics of a count its own RPCs only
	if _, body := get(t, a.URL()+"/metrics"); !strings.Contains(body, "rpc_server") {
		t.Fatalf("/metrics of a lacks rpc metrics:\n%s", body)
	}
	if code := a.Stop(t); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, a.Log())
	}
	disctest.Eventually(t, reg, discovery.RolePlanner, disctest.HasIDs("planner-b"), "a deregistered on shutdown")
}

// A service bound to every interface publishes an address a peer can dial
// (loopback, for the same-host file discovery), not [::]:port.
func TestWildcardListenPublishesLoopback(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := meshtest.Start(t, spec(), "-discovery-dir", dir, "-id", "planner-w", "-listen", "0.0.0.0:0")
	reg, err := filedisc.New(filedisc.Config{Dir: dir, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ins := disctest.Eventually(t, reg, discovery.RolePlanner, disctest.HasIDs("planner-w"), "registered")
	host, port, err := net.SplitHostPort(ins[0].Address)
	if err != nil || host != "127.0.0.1" || !strings.HasSuffix(r.Addr, ":"+port) {
		t.Fatalf("published %q (bound %s), want 127.0.0.1 and the bound port", ins[0].Address, r.Addr)
	}
	meshtest.CheckGRPC(t, ins[0].Address, "planner")
}

func TestBadSettingsFailFast(t *testing.T) {
	t.Parallel()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-listen", "nonsense"}, `-listen="nonsense"`},
		{[]string{"-listen", "127.0.0.1:70000"}, `-listen="127.0.0.1:70000"`},
		{[]string{"-discovery", "zookeeper"}, `-discovery="zookeeper"`},
		{[]string{"-log-level", "loud"}, `-log-level="loud"`},
		{[]string{"-no-such-flag"}, "flag provided but not defined: -no-such-flag"},
		{[]string{"stray"}, `unexpected argument "stray"`},
		{[]string{"-discovery", "consul", "-consul-addr", "127.0.0.1:1"}, `-consul-addr="127.0.0.1:1"`},
		{[]string{"-advertise", ":9000"}, `-advertise=":9000"`},
		{[]string{"-advertise", "0.0.0.0:9000"}, `-advertise="0.0.0.0:9000"`},
		{[]string{"-id", "bad id"}, `-id="bad id"`},
		{[]string{"-discovery", "consul", "-listen", ":0"}, `-listen=":0" binds every interface`},
		{[]string{"-deregister-grace", "-1s"}, `-deregister-grace=-1s`},
		{[]string{"-deregister-grace", "2h"}, `-deregister-grace=2h0m0s`},
		{[]string{"-tls-cert", "a.crt"}, `-tls-cert="a.crt" -tls-key="" -tls-ca="": set all three or none`},
		{[]string{"-discovery", "none", "-tls-cert", "/nonexistent/a.crt", "-tls-key", "/nonexistent/a.key", "-tls-ca", "/nonexistent/ca.crt"},
			"-tls-cert, -tls-key, -tls-ca: tls: stat /nonexistent/a.crt"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			code := service.Run(context.Background(), spec(), service.Env{Args: tc.args, Stdout: &out, Stderr: &out})
			if code == 0 || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("code %d, output %q; want non-zero and %q", code, out.String(), tc.want)
			}
		})
	}
}

func TestServiceFlagsAndVersion(t *testing.T) {
	t.Parallel()
	var n int
	s := spec()
	s.Flags = func(fs *flag.FlagSet) { fs.IntVar(&n, "workers", 1, "") }
	var out bytes.Buffer
	if code := service.Run(context.Background(), s, service.Env{Args: []string{"-workers", "3", "-version"}, Stdout: &out, Stderr: &out}); code != 0 {
		t.Fatalf("code %d: %s", code, out.String())
	}
	if n != 3 || out.String() != "planner v0.0.1-test\n" {
		t.Fatalf("n=%d out=%q", n, out.String())
	}
}

// The profiler is served only when asked for.
func TestPprofFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	off := meshtest.Start(t, spec(), "-discovery-dir", dir, "-id", "planner-off")
	on := meshtest.Start(t, spec(), "-discovery-dir", dir, "-id", "planner-on", "-pprof")
	if code, _ := get(t, off.URL()+"/debug/pprof/cmdline"); code != http.StatusNotFound {
		t.Fatalf("without -pprof: /debug/pprof/cmdline = %d, want 404", code)
	}
	if code, body := get(t, on.URL()+"/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("with -pprof: /debug/pprof/ = %d", code)
	}
}

// AfterDrain hooks run at shutdown, after the server stopped serving, with
// a live context.
func TestAfterDrain(t *testing.T) {
	t.Parallel()
	var ran atomic.Int32
	var served atomic.Bool
	s := spec()
	s.Setup = func(_ context.Context, rt *service.Runtime) error {
		rt.AfterDrain(func(ctx context.Context) {
			if ctx.Err() == nil && served.Load() {
				ran.Add(1)
			}
		})
		return nil
	}
	r := meshtest.Start(t, s, "-discovery", "none")
	if code, _ := get(t, r.URL()+"/health"); code == http.StatusOK {
		served.Store(true)
	}
	if ran.Load() != 0 {
		t.Fatal("hook ran before shutdown")
	}
	if code := r.Stop(t); code != 0 {
		t.Fatalf("exit code %d:\n%s", code, r.Log())
	}
	if ran.Load() != 1 {
		t.Fatalf("hook ran %d times with a live context, want once", ran.Load())
	}
}
