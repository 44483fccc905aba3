package progress

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"switchyard.dev/loadtest/internal/runner"
)

func TestBarText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		f    float64
		want string
	}{
		{0, "[··········]   0%"},
		{0.5, "[█████·····]  50%"},
		{1, "[██████████] 100%"},
		{-1, "[··········]    "},
	}
	for _, tt := range tests {
		if got := BarText(tt.f, 10); got != tt.want {
			t.Errorf("BarText(%v) = %q, want %q", tt.f, got, tt.want)
		}
	}
}

func TestLine(t *testing.T) {
	t.Parallel()
	s := runner.Stats{Issued: 12, Done: 10, Failed: 1, OutputTokens: 500, Elapsed: 5 * time.Second}
	want := "10/100 req done, 2 in flight, 1 failed | 2.00 req/s | 100 tok/s | 5s"
	if got := Line(s, 100); got != want {
		t.Fatalf("Line = %q, want %q", got, want)
	}
}

func TestParseStyle(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	tests := []struct {
		in   string
		want Style
	}{
		{"auto", Lines}, {"", Lines}, {"bar", Bar}, {"lines", Lines}, {"off", Off},
	}
	for _, tt := range tests {
		if got, err := ParseStyle(tt.in, &buf); err != nil || got != tt.want {
			t.Errorf("ParseStyle(%q) = %v, %v", tt.in, got, err)
		}
	}
	if _, err := ParseStyle("fancy", &buf); err == nil {
		t.Error("unknown style accepted")
	}
}

func TestReporterLines(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			Reporter{W: &buf, Style: Lines, Total: 4, Interval: time.Second}.Run(ctx, func() runner.Stats {
				return runner.Stats{Done: 1, Elapsed: time.Second}
			})
			close(done)
		}()
		time.Sleep(3500 * time.Millisecond)
		cancel()
		<-done
		if n := strings.Count(buf.String(), "\n"); n != 4 { // three ticks and the final line
			t.Fatalf("%d lines, want 4:\n%s", n, buf.String())
		}
		if strings.Contains(buf.String(), "\r") {
			t.Fatal("plain lines contain carriage returns")
		}
	})
}

func TestReporterBar(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			time.Sleep(time.Second)
			cancel()
		}()
		Reporter{W: &buf, Style: Bar, Total: 4}.Run(ctx, func() runner.Stats { return runner.Stats{Done: 2} })
		out := buf.String()
		if !strings.HasPrefix(out, "\r[") || !strings.HasSuffix(out, "\n") || !strings.Contains(out, " 50%") {
			t.Fatalf("bar output %q", out)
		}
	})
}
