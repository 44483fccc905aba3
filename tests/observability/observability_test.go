package observability

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/tests/promqlnames"
)

const (
	promDir      = "../../deploy/prometheus"
	dashboardDir = "../../deploy/grafana/dashboards"
)

func ruleFiles() []string {
	return []string{filepath.Join(promDir, "rules", "switchyard.rules.yml"), filepath.Join(promDir, "rules", "switchyard.alerts.yml")}
}

// known is every name a query may select: the inventory's families and
// the recorded series.
func known(t *testing.T) (Inventory, map[string]bool) {
	t.Helper()
	inv, err := ReadInventory(filepath.Join(promDir, "inventory.txt"))
	if err != nil {
		t.Fatal(err)
	}
	rules, err := ReadRules(ruleFiles()...)
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for _, r := range rules {
		if r.Record != "" {
			recorded[r.Record] = true
		}
	}
	return inv, recorded
}

// Every dashboard query names only exported metrics and recorded series,
// and every dashboard reads at least one recording rule.
func TestDashboardsNameExistingMetrics(t *testing.T) {
	t.Parallel()
	inv, recorded := known(t)
	queries, err := DashboardQueries(dashboardDir)
	if err != nil {
		t.Fatal(err)
	}
	usesRule := map[string]bool{}
	dashboards := map[string]bool{}
	for _, q := range queries {
		dashboards[q.Dashboard] = true
		names := promqlnames.Names(q.Expr)
		if len(names) == 0 {
			t.Errorf("%s / %s: %q selects no metric", q.Dashboard, q.Panel, q.Expr)
		}
		for _, n := range names {
			switch {
			case recorded[n]:
				usesRule[q.Dashboard] = true
			case !inv.Has(n):
				t.Errorf("%s / %s: %s is neither exported (deploy/prometheus/inventory.txt) nor recorded", q.Dashboard, q.Panel, n)
			}
		}
	}
	for _, want := range []string{"fleet-overview.json", "routing.json", "kv-tiers.json", "planner.json"} {
		if !dashboards[want] {
			t.Errorf("dashboard %s missing or without queries", want)
		}
		if !usesRule[want] {
			t.Errorf("%s reads no recording rule", want)
		}
	}
}

// Every rule reads only exported metrics and recorded series.
func TestRulesNameExistingMetrics(t *testing.T) {
	t.Parallel()
	inv, recorded := known(t)
	rules, err := ReadRules(ruleFiles()...)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		for _, n := range promqlnames.Names(r.Expr) {
			if !recorded[n] && !inv.Has(n) {
				t.Errorf("rule %s%s: %s is neither exported nor recorded", r.Record, r.Alert, n)
			}
		}
	}
}

func promtool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := deptest.OptionalBinary(t, "promtool", "PROMTOOL_BIN")
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// promtool accepts the rule files, their unit tests pass, and the local
// configuration is valid.
func TestPromtool(t *testing.T) {
	t.Parallel()
	tests, err := filepath.Glob(filepath.Join(promDir, "tests", "*.yml"))
	if err != nil || len(tests) == 0 {
		t.Fatalf("rule tests: %v %v", tests, err)
	}
	for _, args := range [][]string{
		append([]string{"check", "rules"}, ruleFiles()...),
		append([]string{"test", "rules"}, tests...),
		{"check", "config", filepath.Join(promDir, "local.yml")},
	} {
		if out, err := promtool(t, args...); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// The Nomad configuration is valid where promtool knows Consul service
// discovery (Debian's build leaves it out).
func TestPromtoolNomadConfig(t *testing.T) {
	t.Parallel()
	out, err := promtool(t, "check", "config", filepath.Join(promDir, "nomad.yml"))
	if err != nil && strings.Contains(out, "field consul_sd_configs not found") {
		t.Skip("this promtool is built without Consul service discovery")
	}
	if err != nil {
		t.Errorf("promtool check config nomad.yml: %v\n%s", err, out)
	}
}

// Every dashboard query parses: promtool checks them as recording rules.
func TestDashboardQueriesParse(t *testing.T) {
	t.Parallel()
	queries, err := DashboardQueries(dashboardDir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboards\n    rules:\n")
	for i, q := range queries {
		fmt.Fprintf(&b, "      - record: dashboard:query_%d:check\n        expr: %q\n", i, q.Expr)
	}
	path := filepath.Join(t.TempDir(), "dashboards.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := promtool(t, "check", "rules", path); err != nil {
		t.Errorf("dashboard queries do not parse: %v\n%s", err, out)
	}
}

func TestInventoryHas(t *testing.T) {
	t.Parallel()
	inv := Inventory{"h_seconds": "histogram", "s_seconds": "summary", "c_total": "counter"}
	for name, want := range map[string]bool{
		"h_seconds_bucket": true, "h_seconds_sum": true, "s_seconds_count": true, "s_seconds_bucket": false,
		"c_total": true, "c_total_bucket": false, "up": true, "nope": false,
	} {
		if got := inv.Has(name); got != want {
			t.Errorf("Has(%q) = %v; want %v", name, got, want)
		}
	}
}

func TestLabelValuesMetric(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]string{
		"label_values(a, model)":          "a",
		"label_values(a{b=\"c\"}, model)": "a{b=\"c\"}",
		"label_values(model)":             "",
		"up":                              "",
	} {
		got, ok := labelValuesMetric(q)
		if got != want || ok != (want != "") {
			t.Errorf("labelValuesMetric(%q) = %q, %v; want %q", q, got, ok, want)
		}
	}
}
