package report

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard.dev/loadtest/internal/metrics"
)

func TestShellQuote(t *testing.T) {
	t.Parallel()
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"loadtest", "--url", "http://h:8000/v1"}, "loadtest --url http://h:8000/v1"},
		{[]string{"x", "--extra-body", `{"a":1}`}, `x --extra-body '{"a":1}'`},
		{[]string{"x", "it's", ""}, `x 'it'\''s' ''`},
	}
	for _, tt := range tests {
		if got := ShellQuote(tt.argv); got != tt.want {
			t.Errorf("ShellQuote(%q) = %s, want %s", tt.argv, got, tt.want)
		}
	}
}

func TestCSVRows(t *testing.T) {
	t.Parallel()
	recs := []metrics.Record{
		{ID: 1, Err: "HTTP 500: a, \"quoted\"\nmessage", Status: 500},
		{ID: 0, TTFT: 1500 * time.Microsecond, E2E: 10 * time.Millisecond, ITLs: []time.Duration{time.Millisecond, 3 * time.Millisecond},
			OutputTokens: 3, Chunks: 3, InputTokens: 7, UsageReported: true, Status: 200},
	}
	var b strings.Builder
	if err := WriteCSV(&b, recs); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || len(rows[1]) != len(CSVHeader) {
		t.Fatalf("rows %q", rows)
	}
	col := func(row int, name string) string {
		for i, h := range CSVHeader {
			if h == name {
				return rows[row][i]
			}
		}
		t.Fatalf("no column %s", name)
		return ""
	}
	checks := [][3]string{
		{"1", "id", "0"}, {"1", "ttft_ms", "1.500"}, {"1", "itl_mean_ms", "2.000"}, {"1", "itl_max_ms", "3.000"},
		{"1", "tpot_ms", "4.250"}, {"1", "ok", "true"}, {"2", "ok", "false"}, {"2", "error", "HTTP 500: a, \"quoted\"\nmessage"},
	}
	for _, c := range checks {
		row := int(c[0][0] - '0')
		if got := col(row, c[1]); got != c[2] {
			t.Errorf("row %d %s = %q, want %q", row, c[1], got, c[2])
		}
	}
}

func TestSummaryRoundTripAndCompare(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var runs []string
	for i, rps := range []float64{2, 3} {
		s, err := NewSummary([]string{"loadtest", "--rate", "2"}, map[string]string{"endpoint": "chat"})
		if err != nil {
			t.Fatal(err)
		}
		s.Model = "m|x"
		s.Results = metrics.Aggregates{RequestThroughput: rps, TTFTms: metrics.Summary{P99: 100 / rps}}
		d := filepath.Join(dir, []string{"base", "new"}[i])
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := WriteSummary(d, s); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, d)
	}
	loaded, err := LoadRuns(runs)
	if err != nil {
		t.Fatal(err)
	}
	if loaded[0].Summary.CommandLine != "loadtest --rate 2" || loaded[1].Name != "new" {
		t.Fatalf("loaded %+v", loaded)
	}
	table := Compare(loaded)
	var b, text strings.Builder
	if err := table.WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	if err := table.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| metric | base | new | Δ (2 vs 1) |",
		"| model | m\\|x | m\\|x |  |",
		"| workload | synthetic chat | synthetic chat |  |",
		"| request throughput (req/s) | 2.000 | 3.000 | +50.0% ✓ |",
		"| TTFT p99 (ms) | 50.00 | 33.33 | -33.3% ✓ |",
		"| requests failed | 0 | 0 | n/a |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("comparison lacks %q:\n%s", want, b.String())
		}
	}
	if !strings.Contains(text.String(), "m|x") || strings.Contains(text.String(), "---") {
		t.Fatalf("aligned table:\n%s", text.String())
	}
}

func TestSummaryRateProfile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := NewSummary([]string{"loadtest"}, map[string]string{"trace": "/t/conv.jsonl", "rate-profile": "sin:10m,1,3"})
	if err != nil {
		t.Fatal(err)
	}
	s.RateProfile = "sin:10m0s,1,3"
	if err := WriteSummary(dir, s); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSummary(dir)
	if err != nil || got.RateProfile != s.RateProfile {
		t.Fatalf("read back %q (%v)", got.RateProfile, err)
	}
	var b strings.Builder
	if err := Compare([]Run{{Name: "a", Summary: got}}).WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	if want := "| workload | trace conv.jsonl, rate × sin:10m0s,1,3 |"; !strings.Contains(b.String(), want) {
		t.Fatalf("comparison lacks %q:\n%s", want, b.String())
	}
}

func TestReadSummaryErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := ReadSummary(dir); err == nil {
		t.Error("missing summary accepted")
	}
	if err := os.WriteFile(filepath.Join(dir, SummaryFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSummary(dir); err == nil {
		t.Error("corrupt summary accepted")
	}
}
