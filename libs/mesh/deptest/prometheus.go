package deptest

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// requireEnv set to 1 turns a missing optional binary into a failure (the
// variable libs/sharedtest reads for data outside the repository).
const requireEnv = "SWITCHYARD_REQUIRE_SHARED"

// OptionalBinary finds an executable the way Binary does ($envVar, then
// $PATH), but skips the test when it is missing unless
// SWITCHYARD_REQUIRE_SHARED=1, which `make test` sets after installing
// it: Prometheus and promtool are checks of deploy/, not of the services,
// and a machine without them still runs everything else.
func OptionalBinary(t testing.TB, name, envVar string) string {
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
	if os.Getenv(requireEnv) == "1" {
		t.Fatalf("%s not found ($%s or PATH) and %s=1: run scripts/deps.sh, which installs it", name, envVar, requireEnv)
	}
	t.Skipf("%s not found ($%s or PATH); set %s=1 to fail instead", name, envVar, requireEnv)
	return ""
}

// Prometheus is a running prometheus server.
type Prometheus struct {
	*Process
	// URL is the server's base URL, http://host:port.
	URL string
}

// StartPrometheus starts $PROMETHEUS_BIN (or prometheus on $PATH) with
// the configuration file config on a free loopback port, its storage in a
// temporary directory, and waits until it is ready. Relative paths in
// config resolve against the file's directory.
func StartPrometheus(t testing.TB, config string) *Prometheus {
	t.Helper()
	bin := OptionalBinary(t, "prometheus", "PROMETHEUS_BIN")
	dir := t.TempDir()
	p := &Prometheus{}
	args := func() []string {
		addr := "127.0.0.1:" + strconv.Itoa(FreePort(t))
		p.URL = "http://" + addr
		return []string{"--config.file=" + config, "--web.listen-address=" + addr,
			"--storage.tsdb.path=" + filepath.Join(dir, "data"), "--log.level=warn"}
	}
	p.Process = startRetrying(t, bin, filepath.Join(dir, "prometheus.log"), args, func(*Process) bool {
		res, err := http.Get(p.URL + "/-/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return p
}
