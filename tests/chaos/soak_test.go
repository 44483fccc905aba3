package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestSoak is `make soak`: SWITCHYARD_SOAK (a duration) of mixed load on
// the stack without faults, every process sampled every 10s. The report,
// CSV and SVG go beside $SOAK_OUT (default results/soak-<date>.md).
func TestSoak(t *testing.T) {
	v := os.Getenv("SWITCHYARD_SOAK")
	if v == "" {
		t.Skip("the soak runs with SWITCHYARD_SOAK=<duration> (make soak)")
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("SWITCHYARD_SOAK=%q: want a positive duration", v)
	}
	s, l := startLoad(t)
	l.Mixed = true
	p := l.SetPhase("soak")
	ctx, stop := context.WithTimeout(t.Context(), d)
	defer stop()
	samples := SampleEvery(ctx, s, 10*time.Second)
	mw := WatchCounters(ctx, l, s)
	var wg sync.WaitGroup
	wg.Go(func() { l.Run(ctx, 6) })
	wg.Wait()
	all := <-samples
	mw.Poll(t.Context())
	idx := CheckIndex(t.Context(), s, 30*time.Second)

	out := os.Getenv("SOAK_OUT")
	if out == "" {
		out = filepath.Join("..", "..", "results", "soak-"+time.Now().UTC().Format("2006-01-02")+".md")
	}
	base := out[:len(out)-len(filepath.Ext(out))]
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	var csvb, svg, md bytes.Buffer
	if err := WriteCSV(&csvb, all); err != nil {
		t.Fatal(err)
	}
	WritePlot(&svg, all)
	fmt.Fprintf(&md, "# Soak %s\n\n%v of mixed load (streamed and not, client cancellations, bad requests) on %s, no faults.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), d, describe(stackConfig()))
	fmt.Fprintf(&md, "Requests: %d sent, %d succeeded, %d failed (%d wrong text), %d cancelled by the client, %d bad requests refused with 4xx; %d migrated, %d retried by the client. Index match: %v.\n\n",
		p.Sent.Load(), p.OK.Load(), p.Failed.Load(), p.Wrong.Load(), p.Cancelled.Load(), p.Rejected.Load(), p.Migrated.Load(), p.Retried.Load(), idx.Match)
	for _, e := range p.Errors() {
		fmt.Fprintf(&md, "- failure: `%s`\n", oneLine(e))
	}
	for _, m := range idx.Mismatches {
		fmt.Fprintf(&md, "- index: %s\n", oneLine(m))
	}
	WriteSummary(&md, all)
	fmt.Fprintf(&md, "\nSamples every 10s: [%s](%s); plot:\n\n![resources over time](%s)\n",
		filepath.Base(base)+".csv", filepath.Base(base)+".csv", filepath.Base(base)+".svg")
	for name, b := range map[string][]byte{out: md.Bytes(), base + ".csv": csvb.Bytes(), base + ".svg": svg.Bytes()} {
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("report in %s:\n%s", out, md.String())
	if n := p.Failed.Load(); n > 0 {
		t.Errorf("%d requests failed", n)
	}
	if !idx.Match {
		t.Errorf("%d index mismatches", len(idx.Mismatches))
	}
}
