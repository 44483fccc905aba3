package engine

import (
	"sync"
	"testing"

	"switchyard.dev/libs/engine/sim"
)

// TestHundredSimEngines runs 100 simulated workers in one process, a few
// requests each, as the router and planner tests will.
func TestHundredSimEngines(t *testing.T) {
	t.Parallel()
	const engines, perEngine = 100, 3
	var wg sync.WaitGroup
	errs := make(chan string, engines*perEngine)
	for i := range engines {
		ex, err := sim.New(sim.Config{Name: "sim", VocabSize: 300, ContextLen: 2048})
		if err != nil {
			t.Fatal(err)
		}
		e := start(t, Config{NumBlocks: 256}, ex)
		for j := range perEngine {
			st, err := e.Submit(t.Context(), Request{Prompt: prompt(20+j, i), Stop: StopParams{MaxTokens: 8}})
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r := collect(t, st); r.final.Finish != FinishLength || len(r.tokens) != 8 {
					errs <- string(r.final.Finish)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("request ended with %q", e)
	}
}
