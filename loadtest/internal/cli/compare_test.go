package cli

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"switchyard.dev/loadtest/internal/metrics"
	"switchyard.dev/loadtest/internal/report"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestCompareGolden pins the bytes of `loadtest compare` in both formats:
// with two runs (a change column) and three (none), names and models with
// pipes, a trace and a synthetic workload, and a zero baseline (n/a).
func TestCompareGolden(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runs := []struct {
		name     string
		settings map[string]string
		model    string
		scale    float64
	}{
		{"base", map[string]string{"endpoint": "chat"}, "tiny|llama", 1},
		{"new|er", map[string]string{"trace": "/x/conversation|trace.jsonl"}, "tiny-llama", 1.25},
		{"third", nil, "Δ-model", 0.5},
	}
	var dirs []string
	for _, r := range runs {
		s, err := report.NewSummary([]string{"loadtest"}, r.settings)
		if err != nil {
			t.Fatal(err)
		}
		s.Model = r.model
		s.Results = goldenAggregates(r.scale)
		d := filepath.Join(dir, r.name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := report.WriteSummary(d, s); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	tests := []struct {
		golden string
		args   []string
	}{
		{"compare-two.md", append([]string{"compare"}, dirs[:2]...)},
		{"compare-two.txt", append([]string{"compare", "--format", "text"}, dirs[:2]...)},
		{"compare-three.md", append([]string{"compare", "--format", "markdown"}, dirs...)},
		{"compare-three.txt", append([]string{"compare", "--format", "text"}, dirs...)},
	}
	for _, tt := range tests {
		res := runCLI(t.Context(), tt.args...)
		if res.code != ExitOK {
			t.Fatalf("%s: exit %d: %s", tt.golden, res.code, res.stderr)
		}
		path := filepath.Join("testdata", tt.golden)
		if *update {
			if err := os.WriteFile(path, []byte(res.stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if res.stdout != string(want) {
			t.Errorf("%s: got\n%s\nwant\n%s", tt.golden, res.stdout, want)
		}
	}
}

// goldenAggregates fills every compared metric: throughputs grow with
// scale, latencies shrink, and the failed count and cache ratio are zero in
// the baseline.
func goldenAggregates(scale float64) metrics.Aggregates {
	sum := func(base float64) metrics.Summary {
		base /= scale
		return metrics.Summary{Mean: base, P50: 0.9 * base, P90: 1.7 * base, P99: 2.3 * base}
	}
	return metrics.Aggregates{
		DurationS:             60 / scale,
		Succeeded:             int(100 * scale),
		Failed:                int(16 * (scale - 1) * (scale - 1)),
		RequestThroughput:     1.6667 * scale,
		OutputTokenThroughput: 213.37 * scale,
		TotalTokenThroughput:  1234.5 * scale,
		Goodput:               metrics.Goodput{RPS: 1.5 * scale, Fraction: min(1, 0.9*scale)},
		TTFTms:                sum(41.234),
		ITLms:                 sum(7.5),
		TPOTms:                sum(7.9),
		E2Ems:                 sum(1020),
		OutputTokens:          metrics.Summary{Mean: 128 * scale},
		CacheHitRatio:         0.4 * (scale - 1) * (scale - 1),
	}
}
