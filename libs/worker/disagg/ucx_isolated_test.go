//go:build ucx && cgo

package disagg

import (
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/backend/ucx"
	"switchyard.dev/libs/nixl/nixltest"
)

func isolatedUCX(testing.TB) nixl.BackendFactory { return ucx.New(ucx.Config{Isolate: true}) }

// TestUCXIsolated runs the suite over UCX in child processes.
func TestUCXIsolated(t *testing.T) {
	if os.Getenv("UCX_NET_DEVICES") == "" {
		t.Setenv("UCX_NET_DEVICES", "lo")
	}
	runContract(t, isolatedUCX)
}

// TestUCXAbortFallsBackToTCP: when both workers' UCX processes abort, as
// UCX's assertions do, the workers stay up, the request whose prefill was
// in flight is served, and the next remote prefills go over tcp with the
// aggregated output.
func TestUCXAbortFallsBackToTCP(t *testing.T) {
	if os.Getenv("UCX_NET_DEVICES") == "" {
		t.Setenv("UCX_NET_DEVICES", "lo")
	}
	before := childPIDs(t)
	s := newStack(t, stackOpts{backend: isolatedUCX, fallback: tcpBackend, threshold: 8})
	var ucxProcs []int
	for pid := range childPIDs(t) {
		if !before[pid] {
			ucxProcs = append(ucxProcs, pid)
		}
	}
	if len(ucxProcs) != 2 {
		t.Fatalf("%d UCX processes started, want the two workers'", len(ucxProcs))
	}
	ps := prompts(12, 200, 7)
	exact := func(i int) {
		t.Helper()
		r := engine.Request{ID: "r", Prompt: ps[i], Stop: engine.StopParams{MaxTokens: 8, IgnoreEOS: true}}
		if got, want := s.generate(t, r), collect(t, s.ref, r, prep{}); !slices.Equal(got, want) {
			t.Fatalf("prompt %d: disaggregated %v, aggregated %v", i, got, want)
		}
	}
	exact(0)
	if got := s.preAgent.Backend(s.decAgent.Name()); got != ucx.Name {
		t.Fatalf("prefill writes over %q, want ucx", got)
	}
	for _, pid := range ucxProcs {
		if err := syscall.Kill(pid, syscall.SIGABRT); err != nil {
			t.Fatal(err)
		}
	}
	// A request while they die: served, remotely or locally.
	exact(1)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		live := childPIDs(t)
		if !live[ucxProcs[0]] && !live[ucxProcs[1]] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the UCX processes outlived SIGABRT")
		}
	}
	remote := s.obs.count(PathRemote)
	for i := 2; i < len(ps); i++ {
		exact(i)
	}
	if got := s.preAgent.Backend(s.decAgent.Name()); got != "tcp" {
		t.Fatalf("after the aborts prefill writes over %q, want tcp", got)
	}
	if after := s.obs.count(PathRemote) - remote; after < len(ps)-3 {
		t.Fatalf("%d of %d prompts after the aborts were prefilled remotely; want all but the first", after, len(ps)-2)
	}
	waitIdle(t, "decode", s.dec)
	waitIdle(t, "prefill", s.pre)
}

// childPIDs lists this process's children that are still running.
func childPIDs(t *testing.T) map[int]bool { return nixltest.Children(t, os.Getpid()) }

// BenchmarkUCXIsolatedTransferShare is BenchmarkTransferShare over UCX in
// child processes.
func BenchmarkUCXIsolatedTransferShare(b *testing.B) {
	if os.Getenv("UCX_NET_DEVICES") == "" {
		b.Setenv("UCX_NET_DEVICES", "lo")
	}
	benchTransferShare(b, isolatedUCX)
}
