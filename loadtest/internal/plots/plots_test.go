package plots

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	"switchyard.dev/loadtest/internal/metrics"
)

func TestSeries(t *testing.T) {
	t.Parallel()
	const ms = time.Millisecond
	recs := []metrics.Record{
		// 4 tokens in 2 chunks at 100ms and 300ms, ends at 400ms.
		{Start: 0, TTFT: 100 * ms, E2E: 400 * ms, ITLs: []time.Duration{200 * ms}, Chunks: 2, OutputTokens: 4},
		// One chunk at 1.05s; failed requests add tokens but no completion.
		{Start: time.Second, TTFT: 50 * ms, E2E: 60 * ms, Chunks: 1, OutputTokens: 1, Err: "boom"},
	}
	bin, tokens, requests := Series(recs)
	if bin != 100*ms || len(tokens) != 11 {
		t.Fatalf("bin %v, %d bins", bin, len(tokens))
	}
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"tokens at 100ms", tokens[1], 20}, // 2 tokens in a 0.1s bin
		{"tokens at 300ms", tokens[3], 20},
		{"tokens at 1.05s", tokens[10], 10},
		{"request ends at 400ms", requests[4], 10},
		{"failed request not counted", requests[10], 0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestWriteAllEmpty(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := WriteAll(dir, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{TTFTFile, ITLFile, ThroughputFile} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		_, err = png.DecodeConfig(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}
