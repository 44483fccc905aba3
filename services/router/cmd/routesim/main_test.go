package main

import (
	"bytes"
	"context"
	"fmt"
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
	if err := run(context.Background(), []string{"-trace", path, "-workers", "3", "-modes", "kv,round-robin,random"}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"mean TTFT ms", "ratio to kv", " kv ", " round-robin ", " random ", "1.00x"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	good := writeTrace(t, `{"timestamp": 0, "input_length": 100, "output_length": 2, "hash_ids": [1]}`)
	bad := writeTrace(t, `{"timestamp": 0, "input_length": 100, "output_length": 2}`)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no trace", nil, "want -trace"},
		{"stray argument", []string{"-trace", good, "extra"}, "want -trace"},
		{"unknown mode", []string{"-trace", good, "-modes", "kv,nearest"}, "nearest"},
		{"bad record", []string{"-trace", bad}, "hash_ids"},
		{"missing file", []string{"-trace", filepath.Join(t.TempDir(), "none.jsonl")}, "open trace"},
		{"bad flag", []string{"-trace", good, "-workers", "x"}, "invalid value"},
		{"negative rate", []string{"-trace", good, "-rate", "-1"}, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tc.args, &out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
