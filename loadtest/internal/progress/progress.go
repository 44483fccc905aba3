// Package progress shows a run's progress on stderr: a redrawn bar when the
// stream is a terminal, plain periodic lines otherwise (CI logs, files), so
// logs never fill with carriage-return noise.
package progress

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"switchyard.dev/loadtest/internal/runner"
)

// Style selects the rendering.
type Style int

// The styles.
const (
	Off Style = iota
	Bar
	Lines
)

// ParseStyle reads "auto", "bar", "lines" or "off"; auto picks Bar when w
// is a terminal and Lines otherwise.
func ParseStyle(s string, w io.Writer) (Style, error) {
	switch s {
	case "auto", "":
		if IsTerminal(w) {
			return Bar, nil
		}
		return Lines, nil
	case "bar":
		return Bar, nil
	case "lines":
		return Lines, nil
	case "off":
		return Off, nil
	}
	return Off, fmt.Errorf("progress %q: want auto, bar, lines or off", s)
}

// IsTerminal reports whether w is a character device.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Reporter renders progress until its context ends.
type Reporter struct {
	W     io.Writer
	Style Style
	// Total is the expected request count (0: unknown) and Duration the
	// run's time bound (0: none); either gives the bar its fraction.
	Total    int
	Duration time.Duration
	// Interval is the period of plain lines; the bar redraws faster.
	Interval time.Duration
}

// Run renders stats() until ctx ends, then draws a final state.
func (r Reporter) Run(ctx context.Context, stats func() runner.Stats) {
	if r.Style == Off {
		return
	}
	every := r.Interval
	if r.Style == Bar {
		every = 200 * time.Millisecond
	}
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			r.draw(stats(), true)
			return
		case <-t.C:
			r.draw(stats(), false)
		}
	}
}

func (r Reporter) draw(s runner.Stats, final bool) {
	if r.Style == Lines {
		fmt.Fprintln(r.W, Line(s, r.Total))
		return
	}
	end := ""
	if final {
		end = "\n"
	}
	fmt.Fprintf(r.W, "\r%s %s\033[K%s", BarText(r.fraction(s), 30), Line(s, r.Total), end)
}

func (r Reporter) fraction(s runner.Stats) float64 {
	f := -1.0
	if r.Total > 0 {
		f = float64(s.Done) / float64(r.Total)
	}
	if r.Duration > 0 {
		f = max(f, s.Elapsed.Seconds()/r.Duration.Seconds())
	}
	return min(f, 1)
}

// BarText renders a fraction in [0,1] as a bar of width cells; a negative
// fraction (unknown total) renders an empty bar.
func BarText(f float64, width int) string {
	if f < 0 {
		return "[" + strings.Repeat("·", width) + "]    "
	}
	n := int(f * float64(width))
	return fmt.Sprintf("[%s%s] %3.0f%%", strings.Repeat("█", n), strings.Repeat("·", width-n), f*100)
}

// Line is the one-line status used by both styles.
func Line(s runner.Stats, total int) string {
	secs := s.Elapsed.Seconds()
	rps, tps := 0.0, 0.0
	if secs > 0 {
		rps, tps = float64(s.Done)/secs, float64(s.OutputTokens)/secs
	}
	count := fmt.Sprintf("%d", s.Done)
	if total > 0 {
		count += fmt.Sprintf("/%d", total)
	}
	return fmt.Sprintf("%s req done, %d in flight, %d failed | %.2f req/s | %.0f tok/s | %s",
		count, s.Issued-s.Done, s.Failed, rps, tps, s.Elapsed.Truncate(time.Second))
}
