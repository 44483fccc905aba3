package fanout

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestRun(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	errHalt := errors.New("halted")
	for _, tc := range []struct {
		name      string
		n, depth  int
		failAt    int // -1: none
		haltAfter int // calls started before halt reports; -1: never
		want      error
		wantCalls func(int) bool
	}{
		{"all", 100, 4, -1, -1, nil, func(c int) bool { return c == 100 }},
		{"none", 0, 4, -1, -1, nil, func(c int) bool { return c == 0 }},
		{"depth 0 runs one at a time", 10, 0, -1, -1, nil, func(c int) bool { return c == 10 }},
		{"first error stops", 1000, 1, 10, -1, errBoom, func(c int) bool { return c == 11 }},
		{"halt stops", 1000, 1, -1, 20, errHalt, func(c int) bool { return c == 20 }},
		{"halt after the last call is no failure", 5, 1, -1, 5, nil, func(c int) bool { return c == 5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var calls, inflight, peak atomic.Int64
			halt := func() error {
				if tc.haltAfter >= 0 && calls.Load() >= int64(tc.haltAfter) {
					return errHalt
				}
				return nil
			}
			err := Run(tc.n, tc.depth, halt, func(i int) error {
				calls.Add(1)
				if v := inflight.Add(1); v > peak.Load() {
					peak.Store(v)
				}
				defer inflight.Add(-1)
				if i == tc.failAt {
					return errBoom
				}
				return nil
			})
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Run = %v, want %v", err, tc.want)
			}
			if c := int(calls.Load()); !tc.wantCalls(c) {
				t.Fatalf("%d calls", c)
			}
			if p := peak.Load(); p > int64(max(tc.depth, 1)) {
				t.Fatalf("%d calls in flight, depth %d", p, tc.depth)
			}
		})
	}
}

// TestErrorBeatsHalt: a call that fails while the work is being halted
// reports its error, not the halt.
func TestErrorBeatsHalt(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	var started atomic.Bool
	haltSeen := make(chan struct{})
	var once sync.Once
	halt := func() error {
		if started.Load() {
			once.Do(func() { close(haltSeen) })
			return errors.New("halted")
		}
		return nil
	}
	err := Run(100, 2, halt, func(i int) error {
		if i == 0 {
			started.Store(true)
			<-haltSeen
			return errBoom
		}
		return nil
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Run = %v, want the failed call's error", err)
	}
}
