package cli

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard.dev/loadtest/internal/fakeopenai"
	"switchyard.dev/loadtest/internal/plots"
	"switchyard.dev/loadtest/internal/report"
)

type result struct {
	code           int
	stdout, stderr string
}

func runCLI(ctx context.Context, args ...string) result {
	var out, errb bytes.Buffer
	code := Run(ctx, append([]string{"loadtest"}, args...), &out, &errb)
	return result{code, out.String(), errb.String()}
}

func startFake(t *testing.T) (*fakeopenai.Server, string) {
	t.Helper()
	fake := fakeopenai.New("tiny-llama")
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	return fake, srv.URL
}

// writeTrace writes n records in which every request extends the previous
// conversation's blocks, the shape of the Mooncake conversation trace.
func writeTrace(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		ids := make([]string, 0, i+2)
		for j := range i + 2 {
			ids = append(ids, fmt.Sprint(j))
		}
		fmt.Fprintf(&b, `{"timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": [%s]}`+"\n",
			i*10, (i+2)*512-100, 3+i%4, strings.Join(ids, ", "))
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func readSummary(t *testing.T, dir string) (report.Summary, map[string]string) {
	t.Helper()
	s, err := report.ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	var settings map[string]string
	if err := json.Unmarshal(s.Settings, &settings); err != nil {
		t.Fatal(err)
	}
	return s, settings
}

func readCSV(t *testing.T, dir string) []map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, report.RequestsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0], ",") != strings.Join(report.CSVHeader, ",") {
		t.Fatalf("csv header %v", rows[0])
	}
	var out []map[string]string
	for _, r := range rows[1:] {
		m := map[string]string{}
		for i, h := range rows[0] {
			m[h] = r[i]
		}
		out = append(out, m)
	}
	return out
}

func checkPNGs(t *testing.T, dir string) {
	t.Helper()
	for _, name := range []string{plots.TTFTFile, plots.ITLFile, plots.ThroughputFile} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil || cfg.Width < 100 || cfg.Height < 100 {
			t.Fatalf("%s: %v (%dx%d)", name, err, cfg.Width, cfg.Height)
		}
	}
}

func TestEndToEndTraceReplay(t *testing.T) {
	t.Parallel()
	fake, url := startFake(t)
	tracePath := writeTrace(t, 12)
	out := filepath.Join(t.TempDir(), "run")
	res := runCLI(t.Context(), "--url", url, "--trace", tracePath, "--trace-block-tokens", "16",
		"--speed", "100", "--out", out, "--progress", "lines", "--api-key", "sk-1",
		"--sla-ttft", "10s", "--sla-itl", "10s")
	if res.code != ExitOK {
		t.Fatalf("exit %d\nstderr:\n%s", res.code, res.stderr)
	}

	sum, settings := readSummary(t, out)
	r := sum.Results
	if sum.Model != "tiny-llama" || sum.Interrupted || len(sum.Command) < 5 || !strings.Contains(sum.CommandLine, "--trace-block-tokens 16") {
		t.Fatalf("summary header %+v", sum)
	}
	if settings["trace"] != tracePath || settings["trace-block-tokens"] != "16" || settings["model"] != "tiny-llama" ||
		settings["api-key"] != "(set)" || settings["vocab"] != "512" {
		t.Fatalf("settings %v", settings)
	}
	if r.Total != 12 || r.Succeeded != 12 || r.Failed != 0 || r.Goodput.Met != 12 || r.RequestThroughput <= 0 ||
		r.OutputTokenThroughput <= 0 || r.TTFTms.Count != 12 || r.ITLms.Count == 0 || r.TTFTms.P99 < r.TTFTms.P50 {
		t.Fatalf("results %+v", r)
	}
	// Each request extends the previous one, so every prompt after the
	// first is mostly cached by the fake's prefix cache.
	if r.CacheHitRatio < 0.5 || r.CachedTokens == 0 {
		t.Fatalf("cache hit ratio %v (%d cached)", r.CacheHitRatio, r.CachedTokens)
	}

	rows := readCSV(t, out)
	if len(rows) != 12 {
		t.Fatalf("%d csv rows", len(rows))
	}
	bySession := map[int]map[string]string{}
	for _, row := range rows {
		var s int
		if _, err := fmt.Sscan(row["session"], &s); err != nil {
			t.Fatal(err)
		}
		bySession[s] = row
	}
	for i := range 12 {
		row := bySession[i]
		wantIn := fmt.Sprint(((i+2)*512 - 100 + 31) / 32) // ceil(input_length * 16/512)
		if row["ok"] != "true" || row["input_tokens"] != wantIn ||
			row["output_tokens"] != fmt.Sprint(3+i%4) || row["usage_reported"] != "true" {
			t.Fatalf("row %d: %v (want input %s)", i, row, wantIn)
		}
	}
	checkPNGs(t, out)

	got := fake.Received()
	if len(got) != 12 {
		t.Fatalf("server saw %d requests", len(got))
	}
	for _, g := range got {
		if g.Path != "/v1/completions" || !g.IgnoreEOS || g.HasStop || !g.IncludeUsage || g.Auth != "Bearer sk-1" {
			t.Fatalf("request %+v", g)
		}
		for _, tok := range g.PromptTokens {
			if tok < 3 || tok >= 512 {
				t.Fatalf("token %d outside the vocabulary", tok)
			}
		}
	}
	if !strings.Contains(res.stdout, "requests: 12 ok") || !strings.Contains(res.stderr, "req done") {
		t.Fatalf("stdout %q stderr %q", res.stdout, res.stderr)
	}
}

func TestEndToEndSyntheticChat(t *testing.T) {
	t.Parallel()
	fake, url := startFake(t)
	out := filepath.Join(t.TempDir(), "chat")
	res := runCLI(t.Context(), "--url", url, "--model", "tiny-llama", "--endpoint", "chat",
		"--turns", "fixed:3", "--input-len", "uniform:5,10", "--output-len", "4", "--shared-prefix-ratio", "0.5",
		"--concurrency", "2", "--max-requests", "12", "--out", out, "--progress", "off", "--quiet", "--plots=false")
	if res.code != ExitOK {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	sum, _ := readSummary(t, out)
	if sum.Results.Succeeded != 12 || sum.Results.OutputTokens.Mean != 4 {
		t.Fatalf("results %+v", sum.Results)
	}
	var maxMsgs int
	for _, g := range fake.Received() {
		maxMsgs = max(maxMsgs, len(g.Messages))
		if g.Path != "/v1/chat/completions" {
			t.Fatalf("path %s", g.Path)
		}
	}
	// Third turn: system, user, assistant, user, assistant, user.
	if maxMsgs != 6 {
		t.Fatalf("longest conversation %d messages, want 6", maxMsgs)
	}
}

func TestEndToEndPoissonRate(t *testing.T) {
	t.Parallel()
	_, url := startFake(t)
	out := filepath.Join(t.TempDir(), "rate")
	res := runCLI(t.Context(), "--url", url, "--rate", "500", "--max-requests", "20", "--input-len", "normal:40,5",
		"--output-len", "uniform:2,6", "--out", out, "--progress", "off", "--plots=false")
	if res.code != ExitOK {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if sum, _ := readSummary(t, out); sum.Results.Succeeded != 20 {
		t.Fatalf("results %+v", sum.Results)
	}
	if _, err := os.Stat(filepath.Join(out, plots.TTFTFile)); !os.IsNotExist(err) {
		t.Fatal("plots written with --plots=false")
	}
}

func TestMalformedTraceSendsNothing(t *testing.T) {
	t.Parallel()
	fake, url := startFake(t)
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	body := `{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}
{"timestamp": 1, "input_length": 10, "output_length": 1, "hash_ids": [1]}
{"timestamp": 2, "input_length": 10, "output_length": 1, "hash_ids": [1]
`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	res := runCLI(t.Context(), "--url", url, "--trace", path, "--out", t.TempDir())
	if res.code != ExitUsage || !strings.Contains(res.stderr, path+":3: invalid trace record") {
		t.Fatalf("exit %d stderr %q", res.code, res.stderr)
	}
	if n := len(fake.Received()); n != 0 {
		t.Fatalf("%d requests sent despite the bad trace", n)
	}
}

func TestFailuresStillWriteResults(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(fakeopenai.New("x"))
	deadURL := dead.URL
	dead.Close()
	notSSE := fakeopenai.New("x")
	notSSE.NotSSE = true
	notSSESrv := httptest.NewServer(notSSE)
	t.Cleanup(notSSESrv.Close)
	someFail := fakeopenai.New("x")
	someFail.Fail = func(n int) bool { return n%2 == 0 }
	someFailSrv := httptest.NewServer(someFail)
	t.Cleanup(someFailSrv.Close)

	tests := []struct {
		name       string
		url        string
		model      string
		wantCode   int
		wantStderr string
		wantOK     int
		plots      bool
	}{
		{name: "unreachable", url: deadURL, model: "x", wantCode: ExitFailure, wantStderr: "all 4 requests failed", plots: true},
		{name: "unreachable model lookup", url: deadURL, wantCode: ExitFailure, wantStderr: "model list is unavailable"},
		{name: "not openai", url: notSSESrv.URL, model: "x", wantCode: ExitFailure, wantStderr: "not an OpenAI stream"},
		{name: "half fail", url: someFailSrv.URL, model: "x", wantCode: ExitOK, wantStderr: "injected failure", wantOK: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := filepath.Join(t.TempDir(), "out")
			args := []string{"--url", tt.url, "--max-requests", "4", "--out", out, "--progress", "off", fmt.Sprintf("--plots=%v", tt.plots)}
			if tt.model != "" {
				args = append(args, "--model", tt.model)
			}
			res := runCLI(t.Context(), args...)
			if res.code != tt.wantCode || !strings.Contains(res.stderr, tt.wantStderr) {
				t.Fatalf("exit %d, stderr %q; want %d containing %q", res.code, res.stderr, tt.wantCode, tt.wantStderr)
			}
			if tt.model == "" {
				return
			}
			sum, _ := readSummary(t, out)
			rows := readCSV(t, out)
			if sum.Results.Succeeded != tt.wantOK || sum.Results.Failed != 4-tt.wantOK || len(rows) != 4 {
				t.Fatalf("ok %d failed %d rows %d", sum.Results.Succeeded, sum.Results.Failed, len(rows))
			}
			for _, r := range rows {
				if r["ok"] == "false" && r["error"] == "" {
					t.Fatalf("failed row without message: %v", r)
				}
			}
			if tt.plots { // charts of a run with no successes still render
				checkPNGs(t, out)
			}
		})
	}
}

func TestInterruptWritesPartialResults(t *testing.T) {
	t.Parallel()
	fake, url := startFake(t)
	fake.Block = make(chan struct{})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for len(fake.Received()) < 2 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	out := filepath.Join(t.TempDir(), "partial")
	res := runCLI(ctx, "--url", url, "--model", "m", "--concurrency", "2", "--max-requests", "50", "--out", out, "--progress", "off", "--plots=false")
	if res.code != ExitInterrupted || !strings.Contains(res.stderr, "partial results written") {
		t.Fatalf("exit %d stderr %q", res.code, res.stderr)
	}
	sum, _ := readSummary(t, out)
	if !sum.Interrupted || sum.Results.Canceled != 2 || sum.Results.Total != 2 {
		t.Fatalf("summary interrupted %v results %+v", sum.Interrupted, sum.Results)
	}
	if rows := readCSV(t, out); len(rows) != 2 || rows[0]["canceled"] != "true" {
		t.Fatalf("rows %v", rows)
	}
}

func TestCompare(t *testing.T) {
	t.Parallel()
	_, url := startFake(t)
	dir := t.TempDir()
	for _, name := range []string{"a", "b"} {
		res := runCLI(t.Context(), "--url", url, "--max-requests", "3", "--out", filepath.Join(dir, name), "--progress", "off", "--plots=false")
		if res.code != ExitOK {
			t.Fatalf("run %s: %d %s", name, res.code, res.stderr)
		}
	}
	md := runCLI(t.Context(), "compare", filepath.Join(dir, "a"), filepath.Join(dir, "b"))
	if md.code != ExitOK || !strings.Contains(md.stdout, "| metric | a | b | Δ (2 vs 1) |") ||
		!strings.Contains(md.stdout, "| TTFT p99 (ms) |") || !strings.Contains(md.stdout, "| model | tiny-llama | tiny-llama |") {
		t.Fatalf("markdown compare (%d):\n%s%s", md.code, md.stdout, md.stderr)
	}
	txt := runCLI(t.Context(), "compare", "--format", "text", filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "a", "summary.json"))
	if txt.code != ExitOK || strings.Contains(txt.stdout, "|") || !strings.Contains(txt.stdout, "request throughput (req/s)") {
		t.Fatalf("text compare (%d):\n%s%s", txt.code, txt.stdout, txt.stderr)
	}
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"compare", filepath.Join(dir, "a")}, ExitUsage},
		{[]string{"compare", "--format", "html", "x", "y"}, ExitUsage},
		{[]string{"compare", filepath.Join(dir, "a"), filepath.Join(dir, "missing")}, ExitFailure},
	}
	for _, tt := range tests {
		if res := runCLI(t.Context(), tt.args...); res.code != tt.code {
			t.Errorf("%v: exit %d, want %d (%s)", tt.args, res.code, tt.code, res.stderr)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--nope"}, "flag provided but not defined"},
		{"bad distribution", []string{"--input-len", "zipf:1"}, "--input-len"},
		{"chat trace", []string{"--trace", "x", "--endpoint", "chat"}, "use --endpoint completions"},
		{"bad endpoint", []string{"--endpoint", "embeddings"}, "--endpoint"},
		{"bad arrival", []string{"--rate", "1", "--arrival", "gamma"}, "--arrival"},
		{"stray args", []string{"extra"}, "unexpected arguments"},
		{"bad url", []string{"--url", "localhost:1", "--model", "m", "--out", "/dev/null/x"}, "output folder"},
		{"missing trace", []string{"--trace", "/nonexistent/t.jsonl"}, "open trace"},
		{"bad block scale", []string{"--trace-block-tokens", "1024", "--trace", "TRACE"}, "trace-block-tokens"},
		{"bad progress", []string{"--progress", "fancy", "--model", "m", "--out", "OUT"}, "progress"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := tt.args
			for i, a := range args {
				switch a {
				case "OUT":
					args[i] = t.TempDir()
				case "TRACE":
					args[i] = writeTrace(t, 1)
				}
			}
			res := runCLI(t.Context(), args...)
			if res.code == ExitOK || !strings.Contains(res.stderr, tt.want) {
				t.Fatalf("exit %d stderr %q, want failure containing %q", res.code, res.stderr, tt.want)
			}
		})
	}
	if res := runCLI(t.Context(), "--help"); res.code != ExitOK || !strings.Contains(res.stderr, "loadtest compare") {
		t.Fatalf("--help: %d %q", res.code, res.stderr)
	}
}

func TestRateProfileConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		want    string // canonical profile
		wantErr string
	}{
		{name: "none", args: []string{"--rate", "2"}, want: ""},
		{name: "open loop", args: []string{"--rate", "2", "--rate-profile", "sin:10m,1,3*step:20m,3"}, want: "sin:10m0s,1,3*step:20m0s,3"},
		{name: "open loop with cap", args: []string{"--rate", "2", "--concurrency", "4", "--rate-profile", "piecewise:0s=1,1m=4"}, want: "piecewise:0s=1,1m0s=4"},
		{name: "trace", args: []string{"--trace", "t.jsonl", "--rate-profile", "step:30s,0.5"}, want: "step:30s,0.5"},
		{name: "closed loop", args: []string{"--concurrency", "8", "--rate-profile", "step:1m,2"}, wantErr: "closed-loop load has none"},
		{name: "default closed loop", args: []string{"--rate-profile", "step:1m,2"}, wantErr: "give --rate (open loop) or --trace"},
		{name: "untimed trace", args: []string{"--trace", "t.jsonl", "--trace-timestamps=false", "--rate-profile", "step:1m,2"}, wantErr: "--trace-timestamps=false"},
		{name: "syntax", args: []string{"--rate", "1", "--rate-profile", "sin:10m,3,1"}, wantErr: `--rate-profile: rate profile factor 1 "sin:10m,3,1": low multiplier 3 > high 1`},
		{name: "negative", args: []string{"--rate", "1", "--rate-profile", "step:1m,-1"}, wantErr: `multiplier "-1" is negative`},
		{name: "unknown kind", args: []string{"--rate", "1", "--rate-profile", "square:1m,1,2"}, wantErr: `unknown kind "square"`},
		{name: "times", args: []string{"--rate", "1", "--rate-profile", "piecewise:1m=1,30s=2"}, wantErr: "not after the previous point's 1m0s"},
		{name: "empty factor", args: []string{"--rate", "1", "--rate-profile", "step:1m,2**const:2"}, wantErr: `factor 2 "": empty factor`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := parseConfig(tt.args, io.Discard, time.Now())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, errUsage) {
					t.Fatalf("err = %v, want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if cfg.RateProfile != "" {
				got = cfg.profile.String()
			}
			if got != tt.want {
				t.Fatalf("profile %q, want %q", got, tt.want)
			}
		})
	}
}

// TestEndToEndTraceRateProfile replays a trace with one record every
// 10 ms under a profile that doubles the rate 50 ms in: the scheduled send
// times follow it and summary.json records it.
func TestEndToEndTraceRateProfile(t *testing.T) {
	t.Parallel()
	_, url := startFake(t)
	tracePath := writeTrace(t, 12)
	out := filepath.Join(t.TempDir(), "run")
	res := runCLI(t.Context(), "--url", url, "--trace", tracePath, "--trace-block-tokens", "16",
		"--rate-profile", "step:0.05s,2", "--out", out, "--progress", "off", "--plots=false")
	if res.code != ExitOK {
		t.Fatalf("exit %d\nstderr:\n%s", res.code, res.stderr)
	}
	sum, settings := readSummary(t, out)
	if sum.RateProfile != "step:50ms,2" || settings["rate-profile"] != "step:0.05s,2" {
		t.Fatalf("summary rate_profile %q, settings %q", sum.RateProfile, settings["rate-profile"])
	}
	rows := readCSV(t, out)
	if len(rows) != 12 {
		t.Fatalf("%d rows", len(rows))
	}
	for _, row := range rows {
		var session int
		if _, err := fmt.Sscan(row["session"], &session); err != nil {
			t.Fatal(err)
		}
		want := float64(session * 10)
		if want > 50 {
			want = 50 + (want-50)/2
		}
		if row["scheduled_ms"] != fmt.Sprintf("%.3f", want) || row["ok"] != "true" {
			t.Errorf("session %d: scheduled %s ms, ok %s; want %.3f", session, row["scheduled_ms"], row["ok"], want)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, report.SummaryFile))
	if err != nil || !strings.Contains(string(b), `"rate_profile": "step:50ms,2"`) {
		t.Fatalf("summary.json lacks the profile (%v):\n%s", err, b)
	}
}

// TestEndToEndRateProfileEnds runs open-loop synthetic load whose rate
// drops to 0 for good: the run ends there, short of --max-requests.
func TestEndToEndRateProfileEnds(t *testing.T) {
	t.Parallel()
	_, url := startFake(t)
	out := filepath.Join(t.TempDir(), "ends")
	res := runCLI(t.Context(), "--url", url, "--model", "m", "--rate", "500", "--arrival", "constant",
		"--rate-profile", "step:10ms,0", "--max-requests", "100", "--input-len", "8", "--output-len", "2",
		"--out", out, "--progress", "off", "--plots=false")
	if res.code != ExitOK {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	// Arrivals every 2 ms from 0 to 10 ms inclusive.
	if sum, _ := readSummary(t, out); sum.Results.Total != 6 || sum.RateProfile != "step:10ms,0" {
		t.Fatalf("total %d, profile %q", sum.Results.Total, sum.RateProfile)
	}
	// Without a profile the field is left out.
	plain := filepath.Join(t.TempDir(), "plain")
	if res := runCLI(t.Context(), "--url", url, "--model", "m", "--max-requests", "1", "--out", plain,
		"--progress", "off", "--plots=false"); res.code != ExitOK {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(plain, report.SummaryFile)); err != nil || strings.Contains(string(b), "rate_profile") {
		t.Fatalf("summary without a profile (%v):\n%s", err, b)
	}
}
