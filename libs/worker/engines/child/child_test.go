package child

import (
	"strings"
	"testing"
	"time"
)

func TestStopEndsTheChild(t *testing.T) {
	t.Parallel()
	p, err := Start(Config{Path: "sleep", Args: []string{"30"}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Err() != nil {
		t.Fatalf("running child reports %v", p.Err())
	}
	if err := p.Stop(t.Context(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if p.Err() == nil {
		t.Fatal("no exit reported")
	}
}

// A child that fails reports how, with the end of what it printed.
func TestExitIsReportedWithOutput(t *testing.T) {
	t.Parallel()
	p, err := Start(Config{Path: "sh", Args: []string{"-c", "echo model not found >&2; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if !strings.Contains(p.Err().Error(), "exit status 3") || p.Tail() != "model not found" {
		t.Fatalf("err %v, tail %q", p.Err(), p.Tail())
	}
	if _, err := Start(Config{Path: "/nonexistent/engine"}); err == nil {
		t.Fatal("started a missing binary")
	}
}

func TestTailKeepsTheEnd(t *testing.T) {
	t.Parallel()
	tl := &tail{max: 4}
	_, _ = tl.Write([]byte("abc"))
	_, _ = tl.Write([]byte("defg"))
	if got := tl.String(); got != "defg" {
		t.Fatalf("tail %q", got)
	}
}
