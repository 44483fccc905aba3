package chaos

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// Sample is one process's resources at one moment.
type Sample struct {
	At         time.Duration // since the soak began
	Proc       string
	RSS        int64 // bytes
	Goroutines int   // -1: the process serves no Go metrics
	FDs        int
}

// sampleProc reads p's RSS and open descriptors from /proc, and its
// goroutines from its /metrics (go_goroutines).
func sampleProc(ctx context.Context, hc *http.Client, p *Proc, at time.Duration) (Sample, bool) {
	pid := p.Pid()
	if pid == 0 {
		return Sample{}, false
	}
	s := Sample{At: at, Proc: p.Name, Goroutines: -1}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Sample{}, false
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			s.RSS = kb << 10
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return Sample{}, false
	}
	s.FDs = len(fds)
	if p.ready == nil { // a Switchyard service: it has /metrics
		if m, err := scrape(ctx, hc, p.Addr, "go_goroutines"); err == nil {
			s.Goroutines = int(m["go_goroutines"])
		}
	}
	return s, true
}

// SampleEvery samples every process of the stack each interval until ctx
// ends, and returns the samples then.
func SampleEvery(ctx context.Context, s *Stack, interval time.Duration) <-chan []Sample {
	out := make(chan []Sample, 1)
	go func() {
		hc := mesh.client(2 * time.Second)
		start := time.Now()
		var all []Sample
		procs := append(s.Procs(), s.Consul, s.Redis)
		for {
			at := time.Since(start).Round(time.Second)
			for _, p := range procs {
				if smp, ok := sampleProc(ctx, hc, p, at); ok {
					all = append(all, smp)
				}
			}
			select {
			case <-ctx.Done():
				out <- all
				return
			case <-time.After(interval):
			}
		}
	}()
	return out
}

// WriteCSV writes the samples, one row each.
func WriteCSV(w io.Writer, samples []Sample) error {
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"seconds", "process", "rss_bytes", "goroutines", "open_fds"})
	for _, s := range samples {
		_ = cw.Write([]string{strconv.Itoa(int(s.At.Seconds())), s.Proc, strconv.FormatInt(s.RSS, 10), strconv.Itoa(s.Goroutines), strconv.Itoa(s.FDs)})
	}
	cw.Flush()
	return cw.Error()
}

// WriteSummary writes, per process, the first and last sample and the
// peak, as a markdown table: growth that does not level off is a leak.
func WriteSummary(w io.Writer, samples []Sample) {
	type span struct{ first, last, peak Sample }
	var order []string
	by := map[string]*span{}
	for _, s := range samples {
		sp, ok := by[s.Proc]
		if !ok {
			sp = &span{first: s, peak: s}
			by[s.Proc] = sp
			order = append(order, s.Proc)
		}
		sp.last = s
		if s.RSS > sp.peak.RSS {
			sp.peak.RSS = s.RSS
		}
		sp.peak.Goroutines = max(sp.peak.Goroutines, s.Goroutines)
		sp.peak.FDs = max(sp.peak.FDs, s.FDs)
	}
	fmt.Fprintln(w, "| process | RSS MiB first → last (peak) | goroutines first → last (peak) | open fds first → last (peak) |")
	fmt.Fprintln(w, "|---|---|---|---|")
	mib := func(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }
	g := func(n int) string {
		if n < 0 {
			return "–"
		}
		return strconv.Itoa(n)
	}
	for _, name := range order {
		sp := by[name]
		fmt.Fprintf(w, "| %s | %s → %s (%s) | %s → %s (%s) | %d → %d (%d) |\n", name,
			mib(sp.first.RSS), mib(sp.last.RSS), mib(sp.peak.RSS),
			g(sp.first.Goroutines), g(sp.last.Goroutines), g(sp.peak.Goroutines),
			sp.first.FDs, sp.last.FDs, sp.peak.FDs)
	}
}
