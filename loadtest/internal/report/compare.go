package report

import (
	"encoding/json"
	"path/filepath"
	"strconv"

	"switchyard.dev/loadtest/internal/metrics"
)

// Run is one named run for comparison.
type Run struct {
	Name    string
	Summary Summary
}

type row struct {
	label string
	get   func(a *metrics.Aggregates) float64
	// better is -1 when lower is better, +1 when higher is, 0 when
	// neither; it decides where the delta column puts a check mark.
	better int
	digits int
}

const (
	lower  = -1
	higher = 1
)

var compareRows = []row{
	{label: "requests succeeded", better: higher, get: func(a *metrics.Aggregates) float64 { return float64(a.Succeeded) }},
	{label: "requests failed", get: func(a *metrics.Aggregates) float64 { return float64(a.Failed) }, better: lower},
	{label: "requests canceled", get: func(a *metrics.Aggregates) float64 { return float64(a.Canceled) }, better: lower},
	{label: "duration (s)", get: func(a *metrics.Aggregates) float64 { return a.DurationS }, digits: 1},
	{label: "request throughput (req/s)", better: higher, get: func(a *metrics.Aggregates) float64 { return a.RequestThroughput }, digits: 3},
	{label: "output throughput (tok/s)", better: higher, get: func(a *metrics.Aggregates) float64 { return a.OutputTokenThroughput }, digits: 1},
	{label: "total throughput (tok/s)", better: higher, get: func(a *metrics.Aggregates) float64 { return a.TotalTokenThroughput }, digits: 1},
	{label: "goodput (req/s)", better: higher, get: func(a *metrics.Aggregates) float64 { return a.Goodput.RPS }, digits: 3},
	{label: "SLA met (%)", better: higher, get: func(a *metrics.Aggregates) float64 { return 100 * a.Goodput.Fraction }, digits: 1},
	{label: "TTFT mean (ms)", get: func(a *metrics.Aggregates) float64 { return a.TTFTms.Mean }, better: lower, digits: 2},
	{label: "TTFT p50 (ms)", get: func(a *metrics.Aggregates) float64 { return a.TTFTms.P50 }, better: lower, digits: 2},
	{label: "TTFT p90 (ms)", get: func(a *metrics.Aggregates) float64 { return a.TTFTms.P90 }, better: lower, digits: 2},
	{label: "TTFT p99 (ms)", get: func(a *metrics.Aggregates) float64 { return a.TTFTms.P99 }, better: lower, digits: 2},
	{label: "send lag mean (ms)", get: func(a *metrics.Aggregates) float64 { return a.SendLagms.Mean }, better: lower, digits: 2},
	{label: "send lag max (ms)", get: func(a *metrics.Aggregates) float64 { return a.SendLagms.Max }, better: lower, digits: 2},
	{label: "ITL mean (ms)", get: func(a *metrics.Aggregates) float64 { return a.ITLms.Mean }, better: lower, digits: 2},
	{label: "ITL p50 (ms)", get: func(a *metrics.Aggregates) float64 { return a.ITLms.P50 }, better: lower, digits: 2},
	{label: "ITL p99 (ms)", get: func(a *metrics.Aggregates) float64 { return a.ITLms.P99 }, better: lower, digits: 2},
	{label: "TPOT p50 (ms)", get: func(a *metrics.Aggregates) float64 { return a.TPOTms.P50 }, better: lower, digits: 2},
	{label: "E2E p50 (ms)", get: func(a *metrics.Aggregates) float64 { return a.E2Ems.P50 }, better: lower, digits: 1},
	{label: "E2E p99 (ms)", get: func(a *metrics.Aggregates) float64 { return a.E2Ems.P99 }, better: lower, digits: 1},
	{label: "output tokens mean", get: func(a *metrics.Aggregates) float64 { return a.OutputTokens.Mean }, digits: 1},
	{label: "cache hit ratio (%)", better: higher, get: func(a *metrics.Aggregates) float64 { return 100 * a.CacheHitRatio }, digits: 2},
}

// LoadRuns reads each folder's summary, naming runs by folder; duplicate
// base names fall back to the full path.
func LoadRuns(dirs []string) ([]Run, error) {
	runs := make([]Run, 0, len(dirs))
	seen := map[string]int{}
	for _, d := range dirs {
		seen[filepath.Base(filepath.Clean(d))]++
	}
	for _, d := range dirs {
		s, err := ReadSummary(d)
		if err != nil {
			return nil, err
		}
		name := filepath.Base(filepath.Clean(d))
		if seen[name] > 1 {
			name = filepath.Clean(d)
		}
		runs = append(runs, Run{Name: name, Summary: s})
	}
	return runs, nil
}

// Compare lays runs side by side, one column per run. With exactly two
// runs a last column gives the relative change of the second against the
// first.
func Compare(runs []Run) Table {
	t := Table{Header: []string{"metric"}}
	for _, r := range runs {
		t.Header = append(t.Header, r.Name)
	}
	delta := len(runs) == 2
	if delta {
		t.Header = append(t.Header, "Δ (2 vs 1)")
	}
	t.Rows = append(t.Rows,
		append([]string{"model"}, cells(runs, func(s *Summary) string { return s.Model }, delta)...),
		append([]string{"workload"}, cells(runs, workloadOf, delta)...))
	for _, r := range compareRows {
		cols := []string{r.label}
		vals := make([]float64, len(runs))
		for i := range runs {
			vals[i] = r.get(&runs[i].Summary.Results)
			cols = append(cols, strconv.FormatFloat(vals[i], 'f', r.digits, 64))
		}
		if delta {
			cols = append(cols, change(vals[0], vals[1], r.better))
		}
		t.Rows = append(t.Rows, cols)
	}
	return t
}

func cells(runs []Run, f func(*Summary) string, delta bool) []string {
	out := make([]string, 0, len(runs)+1)
	for i := range runs {
		out = append(out, f(&runs[i].Summary))
	}
	if delta {
		out = append(out, "")
	}
	return out
}

func workloadOf(s *Summary) string {
	var set struct {
		Trace    string `json:"trace"`
		Endpoint string `json:"endpoint"`
	}
	_ = json.Unmarshal(s.Settings, &set)
	w := "synthetic"
	switch {
	case set.Trace != "":
		w = "trace " + filepath.Base(set.Trace)
	case set.Endpoint != "":
		w = "synthetic " + set.Endpoint
	}
	if s.RateProfile != "" {
		w += ", rate × " + s.RateProfile
	}
	return w
}

func change(a, b float64, better int) string {
	if a == 0 {
		return "n/a"
	}
	pct := (b - a) / a * 100
	s := strconv.FormatFloat(pct, 'f', 1, 64) + "%"
	if pct > 0 {
		s = "+" + s
	}
	if (pct < 0 && better == lower) || (pct > 0 && better == higher) {
		s += " ✓"
	}
	return s
}
