//go:build ucx && cgo

package ucx_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/backend/ucx"
	"switchyard.dev/libs/nixl/nixltest"
)

// targetEnv makes the test binary a bare target agent (runTarget) instead
// of running tests: the other process of BenchmarkUCXTwoProcess.
const targetEnv = "NIXL_UCX_BENCH_TARGET_BYTES"

// targetCPUsEnv, when set, runs the target process under `taskset -c` on
// those CPUs (scripts/perfcompare.sh pins each side to its own core, as
// it pins ucx_perftest's server and client).
const targetCPUsEnv = "NIXL_UCX_BENCH_TARGET_CPUS"

// runTarget registers an arena of the given size, prints its agent's
// metadata as one hex line and serves writes until stdin closes.
func runTarget(size string) int {
	n, err := strconv.Atoi(size)
	if err != nil || n <= 0 {
		fmt.Fprintln(os.Stderr, "bad", targetEnv, size)
		return 2
	}
	a, err := nixl.NewAgent(nixl.Config{Name: "target", Backends: []nixl.BackendFactory{ucx.New(benchConfig())}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer a.Close()
	ar, err := arena.Map(max(n, arena.HugePage)) // as the initiator's
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer ar.Close()
	if _, err := a.RegisterMemory(ar.Bytes()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	md, err := a.Metadata()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	nixltest.ServePeer(md)
	return 0
}

// BenchmarkUCXTwoProcess is the Perftest benchmark (ucx_perftest's
// pattern: window nixltest.PerftestWindow, one buffer) with the target
// agent in another process, as ucx_perftest runs its server: the two UCX
// workers do not share a Go runtime or its threads.
func BenchmarkUCXTwoProcess(b *testing.B) {
	for _, size := range nixltest.BenchSizes {
		b.Run("Perftest/"+nixltest.SizeName(size), func(b *testing.B) { benchTwoProcess(b, size) })
	}
}

func benchTwoProcess(b *testing.B, size int) {
	var prefix []string
	if cpus := os.Getenv(targetCPUsEnv); cpus != "" {
		prefix = []string{"taskset", "-c", cpus}
	}
	md := nixltest.StartPeer(b, prefix, targetEnv+"="+strconv.Itoa(size)).Metadata
	init, err := nixl.NewAgent(nixl.Config{Name: "init", Backends: []nixl.BackendFactory{ucx.New(benchConfig())}})
	if err != nil {
		b.Fatal(err)
	}
	defer init.Close()
	ar, err := arena.Map(max(size, arena.HugePage)) // a block in a KV-sized arena, as in nixltest
	if err != nil {
		b.Fatal(err)
	}
	defer ar.Close()
	local, err := init.RegisterMemory(ar.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := init.LoadRemoteMetadata(md); err != nil {
		b.Fatal(err)
	}
	req := nixl.XferRequest{Op: nixl.Write, Peer: "target",
		Local:  []nixl.Desc{{Region: local, Len: uint64(size)}},
		Remote: []nixl.Desc{{Region: 1, Len: uint64(size)}}}
	x, err := init.Post(req) // connect, fault pages in
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := x.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	reqs := make([]nixl.XferRequest, nixltest.PerftestWindow)
	for i := range reqs {
		reqs[i] = req
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	nixltest.Window(b, init, reqs)
}
