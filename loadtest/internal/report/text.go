package report

import (
	"fmt"
	"io"
	"strings"

	"switchyard.dev/loadtest/internal/metrics"
)

// WriteText prints a short human summary of a run.
func WriteText(w io.Writer, a metrics.Aggregates) {
	var b strings.Builder
	fmt.Fprintf(&b, "requests: %d ok, %d failed, %d canceled in %.2fs\n", a.Succeeded, a.Failed, a.Canceled, a.DurationS)
	fmt.Fprintf(&b, "throughput: %.3f req/s, %.1f output tok/s, %.1f total tok/s\n",
		a.RequestThroughput, a.OutputTokenThroughput, a.TotalTokenThroughput)
	fmt.Fprintf(&b, "goodput: %.3f req/s (%d met SLA, %.1f%% of ok)\n", a.Goodput.RPS, a.Goodput.Met, 100*a.Goodput.Fraction)
	fmt.Fprintf(&b, "cache: %d of %d prompt tokens cached (%.2f%%)\n", a.CachedTokens, a.PromptTokens, 100*a.CacheHitRatio)
	fmt.Fprintf(&b, "%-14s %10s %10s %10s %10s %10s %10s\n", "", "mean", "p50", "p90", "p99", "min", "max")
	for _, r := range []struct {
		name string
		s    metrics.Summary
	}{
		{"TTFT ms", a.TTFTms}, {"ITL ms", a.ITLms}, {"TPOT ms", a.TPOTms}, {"E2E ms", a.E2Ems}, {"send lag ms", a.SendLagms},
		{"input tokens", a.InputTokens}, {"output tokens", a.OutputTokens},
	} {
		fmt.Fprintf(&b, "%-14s %10.2f %10.2f %10.2f %10.2f %10.2f %10.2f\n", r.name, r.s.Mean, r.s.P50, r.s.P90, r.s.P99, r.s.Min, r.s.Max)
	}
	for _, e := range a.Errors {
		fmt.Fprintf(&b, "error ×%d: %s\n", e.Count, e.Message)
	}
	_, _ = io.WriteString(w, b.String())
}
