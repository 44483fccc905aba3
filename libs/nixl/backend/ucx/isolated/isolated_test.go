//go:build ucx && cgo

package isolated_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/backend/tcp"
	"switchyard.dev/libs/nixl/backend/ucx"
	"switchyard.dev/libs/nixl/metadata"
	"switchyard.dev/libs/nixl/nixltest"
)

func TestMain(m *testing.M) {
	// Keep UCX's tcp transport off the machine's external interface.
	if os.Getenv("UCX_NET_DEVICES") == "" {
		os.Setenv("UCX_NET_DEVICES", "lo")
	}
	if name := os.Getenv(peerEnv); name != "" {
		os.Exit(runPeer(name))
	}
	nixltest.MapArena = arena.MapShared
	os.Exit(m.Run())
}

func isolated() nixl.BackendFactory { return ucx.New(ucx.Config{Isolate: true}) }

func setup(testing.TB) (a, b nixl.BackendFactory) { return isolated(), isolated() }

func TestContract(t *testing.T) {
	nixltest.Run(t, setup, nixltest.Caps{Backend: ucx.Name})
}

func BenchmarkIsolated(b *testing.B) { nixltest.Bench(b, setup) }

// children lists the processes this one started that are still running.
func children(t *testing.T) map[int]bool { return nixltest.Children(t, os.Getpid()) }

// agent is a test agent with ucx (isolated) then tcp, and an arena.
type agent struct {
	*nixl.Agent
	mem    []byte
	region nixl.RegionID
	pid    int // its UCX process
}

func newAgent(t *testing.T, name string) *agent {
	t.Helper()
	before := children(t)
	a, err := nixl.NewAgent(nixl.Config{Name: name, Backends: []nixl.BackendFactory{isolated(), tcp.New(tcp.Config{})}})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := arena.MapShared(4 << 20)
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.RegisterMemory(ar.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(); _ = ar.Close() })
	x := &agent{Agent: a, mem: ar.Bytes(), region: id}
	for pid := range children(t) {
		if !before[pid] {
			x.pid = pid
		}
	}
	if x.pid == 0 {
		t.Fatal("no UCX process started")
	}
	return x
}

func exchange(t *testing.T, from, to *agent) {
	t.Helper()
	md, err := from.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := to.LoadRemoteMetadata(md); err != nil {
		t.Fatal(err)
	}
}

func write(ctx context.Context, from, to *agent, off, n uint64) error {
	x, err := from.Post(nixl.XferRequest{Op: nixl.Write, Peer: to.Name(),
		Local:  []nixl.Desc{{Region: from.region, Offset: off, Len: n}},
		Remote: []nixl.Desc{{Region: to.region, Offset: off, Len: n}}})
	if err != nil {
		return err
	}
	return x.Wait(ctx)
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = byte(i)*31 + seed
	}
}

// An abort inside UCX ends the UCX process, not the program: transfers in
// flight on it fail with ErrPeerGone (none hangs), the agent stops
// advertising ucx, and its transfers and its peer's (once it loads the
// fresh metadata) go over tcp, with the bytes intact.
func TestAbortInUCXEndsOnlyItsProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	a, b := newAgent(t, "a"), newAgent(t, "b")
	exchange(t, a, b)
	exchange(t, b, a)
	fill(a.mem, 1)
	if err := write(ctx, a, b, 0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if got := a.Backend("b"); got != ucx.Name {
		t.Fatalf("a writes to b over %q, want ucx", got)
	}

	// Writes in flight while a's UCX process aborts (SIGABRT is what
	// UCX's failed assertions raise).
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		wg.Go(func() {
			for range 8 {
				errs <- write(ctx, a, b, uint64(i)<<19, 1<<19)
			}
		})
	}
	time.Sleep(5 * time.Millisecond)
	if err := syscall.Kill(a.pid, syscall.SIGABRT); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			if !errors.Is(err, nixl.ErrPeerGone) {
				t.Fatalf("a write in flight at the abort ended with %v, want ErrPeerGone", err)
			}
			failed++
		}
	}
	t.Logf("%d of 64 writes in flight failed with the UCX process", failed)

	blob, err := a.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.Decode(blob)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := md.Backend(ucx.WireName); ok {
		t.Fatal("a still advertises ucx after losing its UCX process")
	}
	fill(a.mem, 2)
	if err := write(ctx, a, b, 0, 4<<20); err != nil {
		t.Fatalf("a's write after the abort: %v", err)
	}
	if got := a.Backend("b"); got != "tcp" {
		t.Fatalf("a writes to b over %q after the abort, want tcp", got)
	}
	if !bytes.Equal(a.mem, b.mem) {
		t.Fatal("b's arena differs from what a wrote over tcp")
	}
	exchange(t, a, b)
	fill(b.mem, 3)
	if err := write(ctx, b, a, 0, 4<<20); err != nil {
		t.Fatalf("b's write to a after a lost ucx: %v", err)
	}
	if got := b.Backend("a"); got != "tcp" {
		t.Fatalf("b writes to a over %q, want tcp", got)
	}
	if !bytes.Equal(a.mem, b.mem) {
		t.Fatal("a's arena differs from what b wrote over tcp")
	}
}
