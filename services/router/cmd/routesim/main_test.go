package main

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeTrace(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRunPrintsEachMode(t *testing.T) {
	t.Parallel()
	var lines []string
	for i := range 40 {
		// Four conversations, each turn one block longer than the last.
		conv, turn := i%4, i/4
		ids := make([]string, turn+1)
		for j := range ids {
			ids[j] = fmt.Sprint(conv*100 + j)
		}
		lines = append(lines, fmt.Sprintf(`{"timestamp": %d, "input_length": %d, "output_length": 8, "hash_ids": [%s]}`,
			i*50, 512*(turn+1), strings.Join(ids, ", ")))
	}
	path := writeTrace(t, lines...)
	var out bytes.Buffer
	csvPath := filepath.Join(t.TempDir(), "outcomes.csv")
	if err := run(t.Context(), []string{"-trace", path, "-workers", "3", "-modes", "kv, round-robin,random", "-csv", csvPath}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+3*40 || strings.Join(recs[0], ",") != "mode,request,worker,ttft_ms,prompt_tokens,cached_tokens,queue_ms,pulled_blocks" {
		t.Fatalf("CSV has %d rows, header %v: want a header and 40 rows a mode", len(recs), recs[0])
	}
	if r := recs[1+40+5]; r[0] != "round-robin" || r[1] != "5" || r[2] != "2" || r[3] == "" {
		t.Fatalf("round-robin's request 5: %v, want worker 2 (5 mod 3) and a TTFT", r)
	}
	rows := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(rows) != 4 || !strings.Contains(rows[0], "mean TTFT ms") || !strings.Contains(rows[0], "kv's") {
		t.Fatalf("want a header and three rows:\n%s", out.String())
	}
	for i, mode := range []string{"kv", "round-robin", "random"} {
		f := strings.Fields(rows[i+1])
		// Columns: mode, mean, p50, p90, p99, mean queue, hit ratio, pulls, (blocks), onboarded
		// host/disk, failed, preempted, ratio.
		if len(f) != 13 || f[0] != mode || f[10] != "0" || (mode != "kv" && f[7] != "0") || f[9] != "0/0/0" {
			t.Errorf("row %d %q: want mode %s, 13 columns, nothing failed or onboarded, pulls only in kv", i, rows[i+1], mode)
		}
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	t.Parallel()
	good := writeTrace(t, `{"timestamp": 0, "input_length": 100, "output_length": 2, "hash_ids": [1]}`)
	bad := writeTrace(t, `{"timestamp": 0, "input_length": 100, "output_length": 2}`)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no trace", nil, "want -trace"},
		{"stray argument", []string{"-trace", good, "extra"}, "want -trace"},
		{"unknown mode", []string{"-trace", good, "-modes", "kv,nearest"}, `unknown mode "nearest"`},
		{"direct mode", []string{"-trace", good, "-modes", "direct"}, `unknown mode "direct"`},
		{"empty mode", []string{"-trace", good, "-modes", "kv,"}, "empty mode name"},
		{"bad record", []string{"-trace", bad}, "hash_ids"},
		{"missing file", []string{"-trace", filepath.Join(t.TempDir(), "none.jsonl")}, "open trace"},
		{"bad flag", []string{"-trace", good, "-workers", "x"}, "invalid value"},
		{"unwritable csv", []string{"-trace", good, "-csv", filepath.Join(t.TempDir(), "no", "such", "dir.csv")}, "no such file"},
		{"negative rate", []string{"-trace", good, "-rate", "-1"}, "speed -1 must be > 0"},
		{"negative workers", []string{"-trace", good, "-workers", "-2"}, "-2 workers"},
		{"unknown tier profile", []string{"-trace", good, "-host-blocks", "8", "-tier-profile", "tpu"}, `-tier-profile="tpu"`},
		{"negative tier", []string{"-trace", good, "-disk-blocks", "-8"}, "must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			err := run(t.Context(), tc.args, &out, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
