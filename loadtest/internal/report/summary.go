// Package report writes a run's output folder (summary.json, requests.csv)
// and lays several runs side by side for comparison.
//
// summary.json is the contract between a run and anything that reads it
// later (compare, dashboards, CI gates): it carries the exact command line
// and every setting next to the aggregates, so a number can always be traced
// back to how it was produced.
package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"switchyard.dev/loadtest/internal/metrics"
)

// File names inside a run folder.
const (
	SummaryFile  = "summary.json"
	RequestsFile = "requests.csv"
)

// Summary is the content of summary.json.
type Summary struct {
	Tool        string          `json:"tool"`
	Command     []string        `json:"command"`
	CommandLine string          `json:"command_line"`
	Settings    json.RawMessage `json:"settings"`
	Model       string          `json:"model"`
	URL         string          `json:"url"`
	StartedAt   time.Time       `json:"started_at"`
	FinishedAt  time.Time       `json:"finished_at"`
	// RateProfile is the --rate-profile the arrival rate followed, in its
	// canonical form (durations as "10m0s"); empty for a constant rate.
	RateProfile string `json:"rate_profile,omitempty"`
	// Interrupted marks partial results from a run stopped by a signal.
	Interrupted bool               `json:"interrupted"`
	Results     metrics.Aggregates `json:"results"`
}

// NewSummary fills a Summary; settings is marshalled as given.
func NewSummary(argv []string, settings any) (Summary, error) {
	raw, err := json.Marshal(settings)
	if err != nil {
		return Summary{}, fmt.Errorf("encode settings: %w", err)
	}
	return Summary{Tool: "switchyard loadtest", Command: argv, CommandLine: ShellQuote(argv), Settings: raw}, nil
}

// WriteSummary writes dir/summary.json.
func WriteSummary(dir string, s Summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	return writeFile(filepath.Join(dir, SummaryFile), append(b, '\n'))
}

// ReadSummary reads dir/summary.json (or the file itself if dir is one).
func ReadSummary(dir string) (Summary, error) {
	path := dir
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		path = filepath.Join(dir, SummaryFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Summary{}, fmt.Errorf("read run: %w", err)
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return Summary{}, fmt.Errorf("read run %s: %w", path, err)
	}
	return s, nil
}

// writeFile writes through a temporary file so a reader never sees half a
// summary, even if the run is killed while writing.
func writeFile(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// CSVHeader is the column list of requests.csv.
var CSVHeader = []string{
	"id", "session", "turn", "scheduled_ms", "start_ms", "ttft_ms", "e2e_ms", "tpot_ms",
	"itl_mean_ms", "itl_max_ms", "input_tokens", "prompt_tokens", "cached_tokens", "max_tokens",
	"output_tokens", "chunks", "usage_reported", "status", "ok", "canceled", "error",
}

// WriteCSV writes one row per request, ordered by id.
func WriteCSV(w io.Writer, recs []metrics.Record) error {
	sorted := slices.Clone(recs)
	slices.SortFunc(sorted, func(a, b metrics.Record) int { return a.ID - b.ID })
	cw := csv.NewWriter(w)
	if err := cw.Write(CSVHeader); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	for i := range sorted {
		r := &sorted[i]
		var itlMax time.Duration
		for _, d := range r.ITLs {
			itlMax = max(itlMax, d)
		}
		row := []string{
			strconv.Itoa(r.ID), strconv.Itoa(r.Session), strconv.Itoa(r.Turn),
			msStr(r.Scheduled), msStr(r.Start), msStr(r.TTFT), msStr(r.E2E), msStr(r.TPOT()),
			msStr(r.MeanITL()), msStr(itlMax),
			strconv.Itoa(r.InputTokens), strconv.Itoa(r.PromptTokens), strconv.Itoa(r.CachedTokens),
			strconv.Itoa(r.MaxTokens), strconv.Itoa(r.OutputTokens), strconv.Itoa(r.Chunks),
			strconv.FormatBool(r.UsageReported), strconv.Itoa(r.Status),
			strconv.FormatBool(r.OK()), strconv.FormatBool(r.Canceled), r.Err,
		}
		if err := cw.Write(row); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

// WriteCSVFile writes dir/requests.csv.
func WriteCSVFile(dir string, recs []metrics.Record) error {
	var b strings.Builder
	if err := WriteCSV(&b, recs); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, RequestsFile), []byte(b.String()))
}

func msStr(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
}

// ShellQuote renders argv as a command line a POSIX shell would split back
// into the same arguments.
func ShellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool {
			return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') && !strings.ContainsRune("-_./:=,@%+", r)
		}) < 0 {
			out[i] = a
			continue
		}
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}
