package engine

import (
	"context"
	"testing"
	"time"

	"switchyard.dev/libs/engine/sched"
	"switchyard.dev/libs/engine/sim"
)

// A step whose only running sequence preempts itself (an import holds half
// the pool) plans no work, but it freed blocks: a waiting request that
// fits now is admitted without any other wake-up. (Run slept on its wake
// channel until some unrelated Submit, cancel or release came.)
func TestAdmitsAfterSelfPreemption(t *testing.T) {
	t.Parallel()
	ex, err := sim.New(sim.Config{VocabSize: 300, ContextLen: 128})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{BlockSize: 4, NumBlocks: 8, MaxRunning: 1, PrefillOrder: sched.OrderShortest}, ex, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	defer func() { cancel(); <-done; _ = e.Close() }()
	imp, err := e.AllocateForImport(4) // a disaggregated import in progress
	if err != nil {
		t.Fatal(err)
	}
	defer e.ReleaseBlocks(blockIDs(imp))
	if _, err := e.Submit(ctx, Request{Prompt: prompt(3, 1), Stop: StopParams{MaxTokens: 20, IgnoreEOS: true}}); err != nil {
		t.Fatal(err)
	}
	b, err := e.Submit(ctx, Request{Prompt: prompt(6, 2), Stop: StopParams{MaxTokens: 1, IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	select { // the Submits' wake-ups, as if an earlier idle wait took them
	case <-e.wake:
	default:
	}
	go func() { done <- e.Run(ctx) }()
	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second) // a hang guard
	defer rcancel()
	for {
		o, err := b.Recv(rctx)
		if err != nil {
			m := e.Metrics()
			t.Fatalf("waiting request never served (%d of %d blocks used, running %d, waiting %d): %v",
				m.KVUsedBlocks, m.KVTotalBlocks, m.Running, m.Waiting, err)
		}
		if o.Finish != "" {
			if o.Finish != FinishLength {
				t.Fatalf("finished %s: %v", o.Finish, o.Err)
			}
			return
		}
	}
}
