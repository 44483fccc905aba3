package engine

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/kvevent"
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
	done := make(chan struct{})
	defer func() { cancel(); <-done; _ = e.Close() }()
	imp, err := e.AllocateForImport(4) // a disaggregated import in progress
	if err != nil {
		t.Fatal(err)
	}
	defer e.ReleaseBlocks(regionIDs(imp))
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
	// Run ends with the test's cancel.
	go func() { defer close(done); _ = e.Run(ctx) }()
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

// Requests submitted to an engine closed without ever running end with
// ErrStopped (their streams waited for ever).
func TestCloseBeforeRunEndsRequests(t *testing.T) {
	t.Parallel()
	ex, err := sim.New(sim.Config{VocabSize: 300, ContextLen: 128})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{BlockSize: 4, NumBlocks: 8}, ex, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Submit(t.Context(), Request{Prompt: prompt(5, 1), Stop: StopParams{MaxTokens: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a hang guard
	defer cancel()
	o, err := st.Recv(ctx)
	if err != nil || o.Finish != FinishError || !errors.Is(o.Err, ErrStopped) {
		t.Fatalf("output %+v, err %v; want FinishError with ErrStopped", o, err)
	}
}

// Blocks an import evicts are reported at once, even on an idle engine
// (the Removed events waited for the next step while the router still saw
// those blocks cached).
func TestImportEvictionsPublished(t *testing.T) {
	t.Parallel()
	ex, err := sim.New(sim.Config{VocabSize: 300, ContextLen: 128})
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, Config{BlockSize: 4, NumBlocks: 8}, ex)
	run(t, e, Request{Prompt: prompt(17, 3), Stop: StopParams{MaxTokens: 1, IgnoreEOS: true}}) // caches 4 blocks
	if e.Metrics().KVCachedBlocks == 0 {
		t.Fatal("nothing cached")
	}
	sub := e.Subscribe(e.EventSeq())
	imp, err := e.AllocateForImport(8) // every block: the cached ones are evicted
	if err != nil {
		t.Fatal(err)
	}
	defer e.ReleaseBlocks(regionIDs(imp))
	ctx, stop := context.WithTimeout(t.Context(), 30*time.Second) // a hang guard
	defer stop()
	b, err := sub.Next(ctx)
	if err != nil {
		t.Fatalf("no event batch after the import evicted cached blocks: %v", err)
	}
	removed := 0
	for _, ev := range b.Events {
		if ev.Kind == kvevent.Removed {
			removed += len(ev.BlockHashes)
		}
	}
	if removed == 0 {
		t.Fatalf("batch %+v has no Removed event", b)
	}
}

// panicOnce panics in its first step, as a bug in an executor would.
type panicOnce struct {
	executor.Executor
	done atomic.Bool
}

func (p *panicOnce) Execute(ctx context.Context, b *executor.Batch) error {
	if !p.done.Swap(true) {
		panic("executor bug")
	}
	return p.Executor.Execute(ctx, b)
}

// A panic in a step fails that step's requests; the engine goes on
// serving (it ended the worker and every request on it).
func TestExecutorPanicFailsTheStep(t *testing.T) {
	t.Parallel()
	ex, err := sim.New(sim.Config{VocabSize: 300, ContextLen: 128})
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, Config{BlockSize: 4, NumBlocks: 32}, &panicOnce{Executor: ex})
	first := run(t, e, Request{Prompt: prompt(5, 1), Stop: StopParams{MaxTokens: 3, IgnoreEOS: true}})
	if first.final.Finish != FinishError || first.final.Err == nil || !strings.Contains(first.final.Err.Error(), "panicked") {
		t.Fatalf("the step that panicked: %+v", first.final)
	}
	second := run(t, e, Request{Prompt: prompt(5, 2), Stop: StopParams{MaxTokens: 3, IgnoreEOS: true}})
	if second.final.Finish != FinishLength || len(second.tokens) != 3 {
		t.Fatalf("after the panic: %+v, %d tokens", second.final, len(second.tokens))
	}
	if m := e.Metrics(); m.KVUsedBlocks != 0 || m.Running != 0 {
		t.Fatalf("state left behind: %+v", m)
	}
}
