package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/deptest"
)

// The local stack as `make run` starts it — every service under the
// supervisor, which keeps a Prometheus file_sd list of its instances —
// scraped by a real Prometheus configured as deploy/prometheus/local.yml
// is (that target file, the repository's rule files): every target comes
// up labelled with its service, and the recording rules produce per-model
// series from live traffic.
func TestPrometheusScrapesMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every service and Prometheus; skipped under -short")
	}
	deptest.OptionalBinary(t, "prometheus", "PROMETHEUS_BIN") // skip before building
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets.json")
	frontend := startSupervisedStack(t, dir, targets)
	rules, err := filepath.Abs("../../deploy/prometheus/rules")
	if err != nil {
		t.Fatal(err)
	}
	// local.yml with the test's target file and a 1s cadence, so rates
	// exist within seconds.
	cfg := fmt.Sprintf(`global: {scrape_interval: 1s, evaluation_interval: 1s}
rule_files: [%q, %q]
scrape_configs:
  - job_name: switchyard
    file_sd_configs: [{files: [%q], refresh_interval: 1s}]
`, filepath.Join(rules, "switchyard.rules.yml"), filepath.Join(rules, "switchyard.alerts.yml"), targets)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	prom := deptest.StartPrometheus(t, cfgPath)

	deptest.Eventually(t, 60*time.Second, "every service's target up", func() bool {
		return upTargets(t, prom.URL) == len(Services)
	})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); traffic(frontend, stop) }()
	t.Cleanup(func() { close(stop); <-done })

	for _, q := range []string{
		`switchyard_build_info`,
		`model:switchyard_frontend_generations:rate5m > 0`,
		`model:switchyard_frontend_completion_tokens:rate5m > 0`,
		`model:switchyard_frontend_ttft_seconds:p99_5m`,
		`model:switchyard_frontend_itl_seconds:p50_5m`,
		`model:switchyard_worker_generated_tokens:rate5m > 0`,
		`model:switchyard_router_hit_ratio:rate5m`,
		`model_tier:switchyard_kv_usage:ratio`,
	} {
		deptest.Eventually(t, 60*time.Second, "series for "+q, func() bool {
			res := query(t, prom.URL, q)
			if q == `switchyard_build_info` {
				return len(res) == len(Services)
			}
			return len(res) > 0 && res[0].Metric["model"] == "sim"
		})
	}
	if res := query(t, prom.URL, `switchyard_build_info{service="decode"}`); len(res) != 1 || res[0].Metric["instance_id"] != "decode-0" {
		t.Errorf("decode build info %v", res)
	}
}

// startSupervisedStack runs every service, sim workers, under the
// supervisor with its Prometheus target file at targets, sends a few
// completions through, and returns the frontend's address.
func startSupervisedStack(t *testing.T, dir, targets string) string {
	t.Helper()
	bin := Build(t)
	common := []string{"-discovery", "file", "-discovery-dir", filepath.Join(dir, "discovery"), "-drain-timeout", "2s", "-id", "{id}", "-listen", "127.0.0.1:{port}"}
	ready := map[string]any{"http": "http://127.0.0.1:{port}/health"}
	var pools []map[string]any
	frontend := ""
	for _, svc := range Services {
		cmd := append([]string{filepath.Join(bin, svc)}, common...)
		if svc == "decode" || svc == "prefill" {
			cmd = append(cmd, "-executor", "sim")
		}
		port := deptest.FreePort(t)
		if svc == "frontend" {
			frontend = fmt.Sprintf("127.0.0.1:%d", port)
		}
		pools = append(pools, map[string]any{"name": svc, "port": port, "ready": ready, "command": cmd})
	}
	spec := map[string]any{"logs": filepath.Join(dir, "logs"), "stop_timeout": "10s", "prometheus_targets": targets, "pools": pools}
	sup := startSpec(t, bin, dir, fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(t)), spec)
	deptest.Eventually(t, 60*time.Second, "the stack up", func() bool { return strings.Contains(sup.Log(), "stack up") })
	warmUp(t, frontend)
	return frontend
}

// traffic sends chat completions to the frontend at addr until stop is
// closed, so counters move between scrapes.
func traffic(addr string, stop <-chan struct{}) {
	url := "http://" + addr + "/v1/chat/completions"
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		body := `{"model":"sim","stream":true,"max_tokens":8,"messages":[{"role":"user","content":"request ` + strconv.Itoa(i%4) + ` with a shared prefix to route by"}]}`
		res, err := http.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
}

func upTargets(t *testing.T, base string) int {
	t.Helper()
	var out struct {
		Data struct {
			ActiveTargets []struct {
				Health string            `json:"health"`
				Labels map[string]string `json:"labels"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if !promGet(t, base+"/api/v1/targets?state=active", &out) {
		return 0
	}
	up := 0
	for _, tg := range out.Data.ActiveTargets {
		if tg.Health == "up" && tg.Labels["service"] != "" {
			up++
		}
	}
	return up
}

type sample struct {
	Metric map[string]string `json:"metric"`
}

func query(t *testing.T, base, q string) []sample {
	t.Helper()
	var out struct {
		Status string `json:"status"`
		Data   struct {
			Result []sample `json:"result"`
		} `json:"data"`
	}
	if !promGet(t, base+"/api/v1/query?query="+url.QueryEscape(q), &out) || out.Status != "success" {
		return nil
	}
	return out.Data.Result
}

func promGet(t *testing.T, u string, v any) bool {
	t.Helper()
	res, err := http.Get(u)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false
	}
	return json.NewDecoder(res.Body).Decode(v) == nil
}
