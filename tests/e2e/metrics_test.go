package e2e

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/tests/metricslint"
)

var updateInventory = flag.Bool("update-inventory", false, "add the families scraped by TestMetricsConventions to deploy/prometheus/inventory.txt")

// inventoryPath is the list of every metric family the services export,
// which dashboards and recording rules are checked against.
const inventoryPath = "../../deploy/prometheus/inventory.txt"

// fleetWide are the switchyard_ families that are not per model: the
// build info, the router's per-worker load, the frontend's per-endpoint
// HTTP view, the planner's lock and the shared store's own bookkeeping.
// Every other switchyard_ family must carry a model label, so a new
// metric is per model unless it is named here.
var fleetWide = []string{
	"switchyard_build_info",
	"switchyard_router_predicted_prefill_blocks", "switchyard_router_predicted_decode_blocks",
	"switchyard_frontend_requests_total", "switchyard_frontend_request_duration_seconds", "switchyard_frontend_requests_in_flight",
	"switchyard_planner_leader",
	"switchyard_kvbm_shared_capacity_bytes", "switchyard_kvbm_shared_evicted_blocks_total",
	"switchyard_kvbm_shared_delete_failures_total", "switchyard_kvbm_shared_listings_total",
	"switchyard_kvbm_shared_listing_failures_total",
}

// lintConfig exempts go_gc_gogc_percent, which client_golang's Go
// collector names after the runtime's /gc/gogc:percent.
var lintConfig = metricslint.Config{PerModel: perModel, Exempt: []string{"go_gc_gogc_percent"}}

func perModel(name string) bool {
	return strings.HasPrefix(name, "switchyard_") && !slices.Contains(fleetWide, name)
}

// fullMesh is every service as a real process on file discovery, with sim
// workers, after a few chat completions went through it.
type fullMesh struct {
	procs map[string]*Proc
	model string
}

func startFullMesh(t *testing.T) *fullMesh {
	t.Helper()
	bin, dir := Build(t), t.TempDir()
	common := []string{"-discovery", "file", "-discovery-dir", dir, "-drain-timeout", "2s"}
	m := &fullMesh{procs: map[string]*Proc{}, model: "sim"}
	for _, svc := range Services {
		args := append([]string{"-id", svc + "-0"}, common...)
		if svc == "decode" || svc == "prefill" {
			args = append(args, "-executor", "sim")
		}
		m.procs[svc] = Start(t, bin, svc, fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(t)), args...)
	}
	warmUp(t, m.procs["frontend"].Addr)
	return m
}

// warmUp waits for a chat completion through the frontend at addr to
// succeed, then sends three more, so every per-request series exists.
func warmUp(t *testing.T, addr string) {
	t.Helper()
	url := "http://" + addr + "/v1/chat/completions"
	body := `{"model":"sim","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"a prompt long enough to fill a few KV blocks of the sim worker"}]}`
	deptest.Eventually(t, 30*time.Second, "a chat completion through the frontend", func() bool {
		res, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			return false
		}
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode == http.StatusOK
	})
	for range 3 {
		res, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
}

func scrape(t *testing.T, addr string) []byte {
	t.Helper()
	res, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: %d %v", addr, res.StatusCode, err)
	}
	return b
}

// Every service's /metrics follows the naming rules (metricslint), exports
// switchyard_build_info, and exports only families the inventory lists
// with the type it lists.
func TestMetricsConventions(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every service; skipped under -short")
	}
	m := startFullMesh(t)
	inv := readInventory(t)
	scraped := map[string]metricslint.Family{}
	for _, svc := range Services {
		body := scrape(t, m.procs[svc].Addr)
		probs, err := metricslint.Lint(body, lintConfig)
		if err != nil {
			t.Fatalf("%s: %v", svc, err)
		}
		for _, p := range probs {
			t.Errorf("%s: %s", svc, p)
		}
		if !strings.Contains(string(body), `switchyard_build_info{`) || !strings.Contains(string(body), `service="`+svc+`"`) {
			t.Errorf("%s: no switchyard_build_info{service=%q}", svc, svc)
		}
		fams, err := metricslint.Parse(strings.NewReader(string(body)))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range metricslint.Families(fams) {
			scraped[f.Name] = f
		}
	}
	for _, want := range []string{"switchyard_frontend_time_to_first_token_seconds", "switchyard_worker_generated_tokens_total", "switchyard_router_decisions_total"} {
		if _, ok := scraped[want]; !ok {
			t.Errorf("%s not exported after traffic", want)
		}
	}
	var missing []string
	for name, f := range scraped {
		typ, ok := inv[name]
		switch {
		case !ok:
			missing = append(missing, name+" "+f.Type)
		case typ != f.Type:
			t.Errorf("%s is a %s; the inventory says %s", name, f.Type, typ)
		}
	}
	sort.Strings(missing)
	if len(missing) == 0 {
		return
	}
	if *updateInventory {
		writeInventory(t, missing)
		return
	}
	t.Errorf("families missing from %s (go test -run TestMetricsConventions -update-inventory adds them):\n%s",
		inventoryPath, strings.Join(missing, "\n"))
}

// readInventory maps family name to type. Lines are "name type", with #
// comments.
func readInventory(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(inventoryPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			t.Fatalf("%s: bad line %q", inventoryPath, line)
		}
		out[fields[0]] = fields[1]
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func writeInventory(t *testing.T, add []string) {
	t.Helper()
	old, err := os.ReadFile(inventoryPath)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.TrimRight(string(old), "\n") + "\n" + strings.Join(add, "\n") + "\n"
	if err := os.WriteFile(filepath.Clean(inventoryPath), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
