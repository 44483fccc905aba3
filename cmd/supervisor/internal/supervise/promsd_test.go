package supervise

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"switchyard.dev/cmd/supervisor/internal/spec"
)

// readTargets reads the target file: service label → targets.
func readTargets(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var groups []targetGroup
	if err := json.Unmarshal(b, &groups); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	out := map[string][]string{}
	for _, g := range groups {
		out[g.Labels["service"]] = append(out[g.Labels["service"]], g.Targets...)
	}
	return out
}

// The Prometheus target file lists every instance with a port, labelled
// with its pool's service, and follows scaling both ways.
func TestPrometheusTargets(t *testing.T) {
	t.Parallel()
	var path string
	var port int
	st := startStack(t, func(s *spec.Spec) {
		path = filepath.Join(t.TempDir(), "targets.json")
		s.PrometheusTargets = path
		s.Pools[1].Service = "decode"
		port = s.Pools[1].Port
	})
	eventually(t, "two workers running", st.allRunning("worker", 2))
	target := func(i int) string { return "127.0.0.1:" + strconv.Itoa(port+i) }
	got := readTargets(t, path)
	if len(got["dep"]) != 1 || !slices.Equal(got["decode"], []string{target(0), target(1)}) {
		t.Fatalf("targets %v; want dep's and decode %v", got, []string{target(0), target(1)})
	}
	if _, err := st.sv.Add("worker", 1); err != nil {
		t.Fatal(err)
	}
	if got := readTargets(t, path); !slices.Equal(got["decode"], []string{target(0), target(1), target(2)}) {
		t.Errorf("after Add: %v", got["decode"])
	}
	if _, err := st.sv.Remove("worker", "worker-0"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "worker-0 out of the targets", func() bool {
		return slices.Equal(readTargets(t, path)["decode"], []string{target(1), target(2)})
	})
}
