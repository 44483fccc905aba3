// Package metricslint checks a service's Prometheus exposition against the
// naming rules Switchyard's metrics follow, so a new metric that breaks
// them fails a test instead of reaching a dashboard:
//
//   - counters end in _total, nothing else does;
//   - no gauge is an in-process rate (_per_second, _rate): export the
//     counter and let PromQL's rate() pick the window;
//   - units are base units spelled out in the name (_seconds, _bytes,
//     _ratio), never _ms, _milliseconds, _kb, _percent;
//   - histograms and summaries end in their unit;
//   - a per-model family carries a model label on every series.
//
// The rules of client_golang's promlint run as well.
package metricslint

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Problem is one rule a family breaks.
type Problem struct {
	Metric string
	Text   string
}

func (p Problem) String() string { return p.Metric + ": " + p.Text }

// Family is what the inventory records of one metric family.
type Family struct {
	Name string
	Type string // counter, gauge, histogram, summary, untyped
}

// Config says which families the model rule applies to.
type Config struct {
	// PerModel reports whether a family's series are per model and so
	// must carry the model label.
	PerModel func(name string) bool
	// Exempt are families named by others (a runtime collector) that
	// break a rule and cannot be renamed.
	Exempt []string
}

// Parse reads a text exposition.
func Parse(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("metricslint: parse exposition: %w", err)
	}
	return fams, nil
}

// Families lists the families of an exposition by name.
func Families(fams map[string]*dto.MetricFamily) []Family {
	out := make([]Family, 0, len(fams))
	for name, f := range fams {
		out = append(out, Family{Name: name, Type: strings.ToLower(f.GetType().String())})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lint checks an exposition in text format. It fails only when the text
// does not parse; the problems it finds are returned, sorted.
func Lint(exposition []byte, cfg Config) ([]Problem, error) {
	fams, err := Parse(bytes.NewReader(exposition))
	if err != nil {
		return nil, err
	}
	var out []Problem
	for name, f := range fams {
		if !slices.Contains(cfg.Exempt, name) {
			out = append(out, lintFamily(f, cfg)...)
		}
	}
	pl, err := promlint.New(bytes.NewReader(exposition)).Lint()
	if err != nil {
		return nil, fmt.Errorf("metricslint: promlint: %w", err)
	}
	for _, p := range pl {
		if !slices.Contains(cfg.Exempt, p.Metric) {
			out = append(out, Problem{Metric: p.Metric, Text: p.Text})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return slices.Compact(out), nil
}

// units are the suffixes a histogram or summary may end in: base units,
// and the counted things whose distribution we record.
var units = []string{"_seconds", "_bytes", "_ratio", "_blocks", "_tokens"}

// badUnits are non-base units and spellings that hide the unit.
var badUnits = []string{"_ms", "_milliseconds", "_microseconds", "_us", "_ns", "_nanoseconds",
	"_minutes", "_hours", "_kb", "_mb", "_gb", "_kib", "_mib", "_gib", "_kilobytes", "_megabytes",
	"_percent", "_pct"}

func lintFamily(f *dto.MetricFamily, cfg Config) []Problem {
	name := f.GetName()
	var out []Problem
	add := func(format string, args ...any) {
		out = append(out, Problem{Metric: name, Text: fmt.Sprintf(format, args...)})
	}
	total := strings.HasSuffix(name, "_total")
	switch f.GetType() {
	case dto.MetricType_COUNTER:
		if !total {
			add("counter does not end in _total")
		}
	case dto.MetricType_GAUGE:
		if total {
			add("gauge ends in _total (only counters do)")
		}
		if strings.Contains(name, "_per_second") || strings.HasSuffix(name, "_rate") {
			add("gauge is an in-process rate: export a counter, PromQL computes rates")
		}
	case dto.MetricType_HISTOGRAM, dto.MetricType_SUMMARY:
		if total {
			add("%s ends in _total", strings.ToLower(f.GetType().String()))
		}
		if !hasAnySuffix(name, units) {
			add("%s does not end in a unit (%s)", strings.ToLower(f.GetType().String()), strings.Join(units, ", "))
		}
	}
	base := strings.TrimSuffix(name, "_total")
	for _, u := range badUnits {
		if strings.HasSuffix(base, u) || strings.Contains(base, u+"_") {
			add("non-base unit %q: use _seconds, _bytes or _ratio", strings.TrimPrefix(u, "_"))
		}
	}
	if cfg.PerModel != nil && cfg.PerModel(name) {
		for _, m := range f.GetMetric() {
			if !hasLabel(m, "model") {
				add("per-model series without a model label: %s", labels(m))
				break
			}
		}
	}
	return out
}

func hasAnySuffix(s string, suffixes []string) bool {
	for _, x := range suffixes {
		if strings.HasSuffix(s, x) {
			return true
		}
	}
	return false
}

func hasLabel(m *dto.Metric, name string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() != "" {
			return true
		}
	}
	return false
}

func labels(m *dto.Metric) string {
	parts := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	return "{" + strings.Join(parts, ",") + "}"
}
