// Package nixltest is the contract suite every nixl backend must pass, and
// the benchmarks run against each. A backend's own tests call Run and
// Bench with a Setup that builds a pair of factories able to reach each
// other.
package nixltest

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
)

// Setup returns factories for two agents that can talk to each other (for
// the local backend they share a registry).
type Setup func(tb testing.TB) (a, b nixl.BackendFactory)

// Caps describes what a backend can promise, so the suite skips checks a
// backend cannot make by design.
type Caps struct {
	// RemoteValidation: the target checks every access against its current
	// registrations (tcp, local). One-sided hardware paths (UCX RMA) trust
	// the initiator's metadata, as RDMA does.
	RemoteValidation bool
	// NoPeerFailure: the backend cannot notice a peer that went away (UCX
	// over shared memory); the suite then skips PeerClosed.
	NoPeerFailure bool
	// Backend is the name Agent.Backend must report after connecting.
	Backend string
}

// MapArena maps the suite's arenas: anonymous memory (arena.Map) unless a
// backend's tests need it shared (arena.MapShared, for the UCX backend
// that runs UCX in a child process); set it in TestMain.
var MapArena = arena.Map

// waitLimit bounds every wait in the suite: a hang fails, it doesn't stall.
const waitLimit = 20 * time.Second

// node is one agent with one registered arena.
type node struct {
	agent  *nixl.Agent
	arena  *arena.Arena
	region nixl.RegionID
}

func (n *node) mem() []byte { return n.arena.Bytes() }

func newNode(tb testing.TB, name string, f nixl.BackendFactory, size int) *node {
	tb.Helper()
	a, err := nixl.NewAgent(nixl.Config{Name: name, Backends: []nixl.BackendFactory{f}})
	if err != nil {
		tb.Fatal(err)
	}
	ar, err := MapArena(size)
	if err != nil {
		tb.Fatal(err)
	}
	id, err := a.RegisterMemory(ar.Bytes())
	if err != nil {
		tb.Fatal(err)
	}
	n := &node{agent: a, arena: ar, region: id}
	// The agent must be closed before its memory is unmapped.
	tb.Cleanup(func() {
		_ = a.Close()
		_ = ar.Close()
	})
	return n
}

// pair builds two nodes that have loaded each other's metadata.
func pair(tb testing.TB, setup Setup, size int) (init, target *node) {
	tb.Helper()
	fa, fb := setup(tb)
	init = newNode(tb, "init", fa, size)
	target = newNode(tb, "target", fb, size)
	exchange(tb, init, target)
	exchange(tb, target, init)
	return init, target
}

// exchange loads src's metadata into dst.
func exchange(tb testing.TB, dst, src *node) {
	tb.Helper()
	md, err := src.agent.Metadata()
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := dst.agent.LoadRemoteMetadata(md); err != nil {
		tb.Fatal(err)
	}
}

func ctxT(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	tb.Cleanup(cancel)
	return ctx
}

// descs splits [0, total) of both sides into n randomly sized descriptors;
// the remote side is placed at a different offset so pairs are not
// trivially aligned.
func descs(r *rand.Rand, local, remote nixl.RegionID, total, n int, remoteBase uint64) (l, rm []nixl.Desc) {
	cuts := make([]int, 0, n+1)
	cuts = append(cuts, 0)
	for i := 1; i < n; i++ {
		cuts = append(cuts, r.IntN(total))
	}
	cuts = append(cuts, total)
	slices.Sort(cuts)
	for i := 0; i+1 < len(cuts); i++ {
		off, ln := uint64(cuts[i]), uint64(cuts[i+1]-cuts[i])
		l = append(l, nixl.Desc{Region: local, Offset: off, Len: ln})
		rm = append(rm, nixl.Desc{Region: remote, Offset: remoteBase + off, Len: ln})
	}
	return l, rm
}

func post(tb testing.TB, a *nixl.Agent, req nixl.XferRequest) error {
	tb.Helper()
	x, err := a.Post(req)
	if err != nil {
		return err
	}
	return x.Wait(ctxT(tb))
}

// waitNotif waits for one notification at n.
func waitNotif(tb testing.TB, n *node, pending *[]nixl.Notif) nixl.Notif {
	tb.Helper()
	ctx := ctxT(tb)
	for len(*pending) == 0 {
		*pending = append(*pending, n.agent.GetNotifs()...)
		if len(*pending) > 0 {
			break
		}
		select {
		case <-n.agent.Notified():
		case <-ctx.Done():
			tb.Fatal("no notification within the limit")
		}
	}
	got := (*pending)[0]
	*pending = (*pending)[1:]
	return got
}
