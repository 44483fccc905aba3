package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"switchyard.dev/libs/engine/sim"
)

// TestArrivalOrdersFirstComeFirstServed: a request that arrived in the
// system before one the engine is already prefilling (it was routed first
// but delivered second) gets the next step's budget ahead of it, and is
// answered first; without an arrival time it waits for the whole prefill.
// The sim's steps advance one at a time at the test's word, so the step
// that answers each request is fixed.
func TestArrivalOrdersFirstComeFirstServed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		arrival   time.Duration // of the short request, against the long one's (0: none)
		wantShort bool          // the short one is answered first
	}{
		{"arrived before the running one", -time.Second, true},
		{"no arrival time", 0, false},
		{"arrival in the future counts as receipt", time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			entered, steps := make(chan struct{}), make(chan struct{})
			var clock atomic.Int64 // the sim's own: a step lasts what it models
			ex, err := sim.New(sim.Config{VocabSize: 512, ContextLen: 4096, SpeedUp: 1,
				Sleep: func(ctx context.Context, d time.Duration) error {
					select {
					case entered <- struct{}{}:
					case <-ctx.Done():
						return ctx.Err()
					}
					select {
					case <-steps:
						clock.Add(int64(d))
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				}, Now: func() time.Time { return time.Unix(0, clock.Load()) }})
			if err != nil {
				t.Fatal(err)
			}
			e := start(t, Config{MaxBatchTokens: 16}, ex)
			// A long decode keeps the engine stepping after both are answered.
			if _, err := e.Submit(t.Context(), Request{ID: "busy", Prompt: prompt(4, 3), Stop: StopParams{MaxTokens: 1000, IgnoreEOS: true}}); err != nil {
				t.Fatal(err)
			}
			<-entered
			longAt := time.Now().Add(-time.Minute)
			long, err := e.Submit(t.Context(), Request{ID: "long", Prompt: prompt(160, 1), Stop: StopParams{MaxTokens: 1, IgnoreEOS: true}, Arrival: longAt})
			if err != nil {
				t.Fatal(err)
			}
			steps <- struct{}{}
			<-entered // the long prompt's first step is under way
			short := Request{ID: "short", Prompt: prompt(8, 2), Stop: StopParams{MaxTokens: 1, IgnoreEOS: true}}
			if tc.arrival != 0 {
				short.Arrival = longAt.Add(tc.arrival)
			}
			st, err := e.Submit(t.Context(), short)
			if err != nil {
				t.Fatal(err)
			}
			answered := map[string]int{} // request → the step that answered it
			streams := map[string]*Stream{"long": long, "short": st}
			noWait, cancel := context.WithCancel(t.Context())
			cancel()
			for step := 1; len(answered) < 2; step++ {
				if step > 100 {
					t.Fatalf("answered after 100 steps: %v", answered)
				}
				steps <- struct{}{} // the step runs; its outputs go out before the next Sleep
				<-entered
				for name, s := range streams {
					if _, ok := answered[name]; !ok {
						if _, err := s.Recv(noWait); err == nil {
							answered[name] = step
						}
					}
				}
			}
			if short := answered["short"] < answered["long"]; short != tc.wantShort {
				t.Fatalf("answered at steps %v; want the short request first: %v", answered, tc.wantShort)
			}
		})
	}
}
