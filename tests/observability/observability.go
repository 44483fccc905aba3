// Package observability loads what deploy/prometheus and deploy/grafana
// define — the metric inventory, the recording and alerting rules, the
// dashboards' queries — so tests can check that they agree: every query
// names a metric a service exports or a rule records, and parses.
package observability

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Inventory maps a metric family name to its type, as
// deploy/prometheus/inventory.txt lists it.
type Inventory map[string]string

// ReadInventory reads an inventory file: "name type" lines, # comments.
func ReadInventory(path string) (Inventory, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("observability: %w", err)
	}
	defer f.Close()
	inv := Inventory{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("observability: %s:%d: want \"name type\", got %q", path, n, line)
		}
		inv[fields[0]] = fields[1]
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("observability: %s: %w", path, err)
	}
	return inv, nil
}

// builtin are series Prometheus itself makes.
var builtin = map[string]bool{
	"up": true, "ALERTS": true, "ALERTS_FOR_STATE": true, "scrape_duration_seconds": true,
	"scrape_samples_scraped": true, "scrape_series_added": true,
}

// Has reports whether name is a series of an inventoried family, or one
// Prometheus makes: a histogram's or summary's _bucket, _sum and _count
// count as its family's.
func (inv Inventory) Has(name string) bool {
	if builtin[name] || inv[name] != "" {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		switch inv[base] {
		case "histogram":
			return true
		case "summary":
			return suffix != "_bucket"
		}
	}
	return false
}

// Rule is one recording or alerting rule.
type Rule struct {
	Record string `yaml:"record"`
	Alert  string `yaml:"alert"`
	Expr   string `yaml:"expr"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []Rule `yaml:"rules"`
	} `yaml:"groups"`
}

// ReadRules reads the rules of Prometheus rule files.
func ReadRules(paths ...string) ([]Rule, error) {
	var out []Rule
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("observability: %w", err)
		}
		var f ruleFile
		if err := yaml.Unmarshal(b, &f); err != nil {
			return nil, fmt.Errorf("observability: %s: %w", p, err)
		}
		for _, g := range f.Groups {
			out = append(out, g.Rules...)
		}
	}
	return out, nil
}

// Query is one PromQL expression of a dashboard, and where it is.
type Query struct {
	Dashboard, Panel, Expr string
}

// grafanaVars are Grafana's built-in interval variables, replaced by a
// duration so the expression parses as PromQL.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "${__rate_interval}", "5m",
	"$__interval", "1m", "${__interval}", "1m", "$__range", "1h", "${__range}", "1h")

// DashboardQueries reads every dashboard JSON file in dir and returns the
// expressions of its panels' targets and of its label_values variables,
// Grafana's interval variables replaced by durations.
func DashboardQueries(dir string) ([]Query, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("observability: %w", err)
	}
	sort.Strings(paths)
	var out []Query
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("observability: %w", err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			return nil, fmt.Errorf("observability: %s: %w", p, err)
		}
		name := filepath.Base(p)
		if d.UID == "" || d.Title == "" {
			return nil, fmt.Errorf("observability: %s: no uid or title", p)
		}
		for _, panel := range d.Panels {
			if len(panel.Targets) == 0 {
				return nil, fmt.Errorf("observability: %s: panel %q has no query", p, panel.Title)
			}
			for _, t := range panel.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					return nil, fmt.Errorf("observability: %s: panel %q has an empty query", p, panel.Title)
				}
				out = append(out, Query{Dashboard: name, Panel: panel.Title, Expr: grafanaVars.Replace(t.Expr)})
			}
		}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				// The query may be a plain string in older dashboards.
				_ = json.Unmarshal(v.Query, &q.Query)
			}
			expr, ok := labelValuesMetric(q.Query)
			if !ok {
				return nil, fmt.Errorf("observability: %s: variable %q: want label_values(<selector>, <label>), got %q", p, v.Name, q.Query)
			}
			out = append(out, Query{Dashboard: name, Panel: "variable " + v.Name, Expr: expr})
		}
	}
	return out, nil
}

type dashboard struct {
	UID    string `json:"uid"`
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

// labelValuesMetric returns the selector of label_values(selector, label).
func labelValuesMetric(q string) (string, bool) {
	inner, ok := strings.CutPrefix(strings.TrimSpace(q), "label_values(")
	if !ok {
		return "", false
	}
	inner, ok = strings.CutSuffix(inner, ")")
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(inner, ',')
	if i <= 0 {
		return "", false
	}
	return strings.TrimSpace(inner[:i]), true
}
