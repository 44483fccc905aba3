//go:build ucx && cgo

package isolated_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/backend/tcp"
	"switchyard.dev/libs/nixl/backend/ucx"
	"switchyard.dev/libs/nixl/nixltest"
)

// peerEnv makes the test binary a bare peer agent (runPeer) instead of
// running tests: the process TestPeerDiesMidTransfer kills.
const peerEnv = "NIXL_ISOLATED_TEST_PEER"

// isolateEnv=1 runs the peer's UCX in a UCX process of its own.
const isolateEnv = "NIXL_ISOLATED_TEST_ISOLATE"

// writeToEnv, when set, holds an agent's metadata (hex) that the peer
// writes to without pause, from 4 goroutines, until it is killed.
const writeToEnv = "NIXL_ISOLATED_TEST_WRITE_TO"

// runPeer runs an agent with in-process UCX and tcp over an arena, prints
// its metadata as one hex line and serves until killed or stdin closes.
func runPeer(name string) int {
	isolate := os.Getenv(isolateEnv) == "1"
	a, err := nixl.NewAgent(nixl.Config{Name: name, Backends: []nixl.BackendFactory{ucx.New(ucx.Config{Isolate: isolate}), tcp.New(tcp.Config{})}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer a.Close()
	mapArena := arena.Map
	if isolate {
		mapArena = arena.MapShared
	}
	ar, err := mapArena(4 << 20)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := a.RegisterMemory(ar.Bytes()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	md, err := a.Metadata()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if to := os.Getenv(writeToEnv); to != "" {
		blob, err := hex.DecodeString(to)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		target, err := a.LoadRemoteMetadata(blob)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for w := range 4 {
			go func() {
				for {
					x, err := a.Post(nixl.XferRequest{Op: nixl.Write, Peer: target,
						Local:  []nixl.Desc{{Region: 1, Offset: uint64(w) << 20, Len: 1 << 20}},
						Remote: []nixl.Desc{{Region: 1, Offset: uint64(w) << 20, Len: 1 << 20}}})
					if err == nil {
						err = x.Wait(context.Background())
					}
					if err != nil {
						time.Sleep(time.Millisecond)
					}
				}
			}()
		}
	}
	nixltest.ServePeer(md)
	return 0
}

// startPeer starts a peer process and loads its metadata into a; with
// writer, the peer writes into a's arena until it is killed.
func startPeer(t *testing.T, a *agent, name string, writer bool) *nixltest.PeerProcess {
	t.Helper()
	env := []string{peerEnv + "=" + name}
	if writer {
		md, err := a.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, writeToEnv+"="+hex.EncodeToString(md))
	}
	p := nixltest.StartPeer(t, nil, env...)
	if _, err := a.LoadRemoteMetadata(p.Metadata); err != nil {
		t.Fatal(err)
	}
	return p
}

// A peer killed while transfers between it and this side are in flight
// (this side writing to it in even rounds, it writing here in odd ones),
// again and again, never takes this side down: every transfer ends (none
// hangs), and when
// UCX aborts on the failure (UCX 1.13's assertions in wire-up) only the
// UCX process dies and the agent goes on over tcp. Each round ends with
// a transfer to a live peer whose bytes arrive intact.
func TestPeerDiesMidTransfer(t *testing.T) {
	rounds := 40
	if s := os.Getenv("NIXL_PEER_DEATH_ROUNDS"); s != "" { // a longer hunt for the abort
		rounds, _ = strconv.Atoi(s)
	}
	a := newAgent(t, "survivor")
	fill(a.mem, 5)
	aborted, failed, done := 0, 0, 0
	for r := range rounds {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		name := fmt.Sprintf("peer-%d", r)
		writer := r%2 == 1
		peer := startPeer(t, a, name, writer)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for w := range 4 {
			if writer { // the peer writes to us this round
				break
			}
			wg.Go(func() {
				for {
					x, err := a.Post(nixl.XferRequest{Op: nixl.Write, Peer: name,
						Local:  []nixl.Desc{{Region: a.region, Offset: uint64(w) << 20, Len: 1 << 20}},
						Remote: []nixl.Desc{{Region: 1, Offset: uint64(w) << 20, Len: 1 << 20}}})
					if err == nil {
						err = x.Wait(ctx)
					}
					mu.Lock()
					done++
					if err != nil {
						failed++
					}
					mu.Unlock()
					if err != nil {
						if ctx.Err() != nil {
							t.Errorf("round %d: a write to the dying peer hung: %v", r, err)
						}
						return
					}
				}
			})
		}
		// Kill it during wire-up in some rounds, mid-stream in others.
		time.Sleep(time.Duration(r%4) * 15 * time.Millisecond)
		_ = peer.Cmd.Process.Signal(syscall.SIGKILL)
		wg.Wait()
		cancel()
		a.Invalidate(name)
		if !nixltest.Alive(a.pid) {
			aborted++
		}
		// A live peer is still served, over ucx or, after an abort, tcp.
		live := fmt.Sprintf("live-%d", r)
		lp := startPeer(t, a, live, false)
		if err := roundTrip(t.Context(), a, live); err != nil {
			t.Fatalf("round %d: a live peer: %v", r, err)
		}
		lp.Stop()
		a.Invalidate(live)
		if aborted > 0 && !nixltest.Alive(a.pid) {
			// Carry on with UCX: a new agent, with a UCX process of its own.
			a = newAgent(t, fmt.Sprintf("survivor-%d", r))
			fill(a.mem, 5)
		}
	}
	t.Logf("%d rounds: %d writes ended, %d of them failed with their peer; a UCX process aborted in %d rounds, this process in none",
		rounds, done, failed, aborted)
}

// roundTrip writes a MiB to peer and reads it back into another part of
// a's arena. A first attempt that fails because a's UCX process died under
// it is made again, as callers do: the agent has moved to tcp by then.
func roundTrip(ctx context.Context, a *agent, peer string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	const n = 1 << 20
	move := func(op nixl.Op, local uint64) error {
		x, err := a.Post(nixl.XferRequest{Op: op, Peer: peer,
			Local:  []nixl.Desc{{Region: a.region, Offset: local, Len: n}},
			Remote: []nixl.Desc{{Region: 1, Len: n}}})
		if err == nil {
			err = x.Wait(ctx)
		}
		return err
	}
	clear(a.mem[2*n : 3*n])
	err := move(nixl.Write, 0)
	if errors.Is(err, nixl.ErrPeerGone) {
		err = move(nixl.Write, 0)
	}
	if err != nil {
		return fmt.Errorf("write: %w", err)
	}
	if err := move(nixl.Read, 2*n); err != nil {
		return fmt.Errorf("read back: %w", err)
	}
	if !bytes.Equal(a.mem[:n], a.mem[2*n:3*n]) {
		return errors.New("the bytes read back differ from those written")
	}
	return nil
}

// A UCX process ends with its program, however the program ends: killed
// outright, it leaves no UCX process behind.
func TestUCXProcessEndsWithItsProgram(t *testing.T) {
	a := newAgent(t, "observer")
	t.Setenv(isolateEnv, "1")
	peer := startPeer(t, a, "isolated-peer", false)
	var ucxProc int
	for deadline := time.Now().Add(10 * time.Second); ucxProc == 0; time.Sleep(10 * time.Millisecond) {
		for pid := range nixltest.Children(t, peer.Cmd.Process.Pid) {
			ucxProc = pid
		}
		if time.Now().After(deadline) {
			t.Fatal("the peer started no UCX process")
		}
	}
	if err := roundTrip(t.Context(), a, "isolated-peer"); err != nil {
		t.Fatalf("to a peer with isolated UCX: %v", err)
	}
	peer.Stop()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if !nixltest.Alive(ucxProc) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the UCX process %d outlived its program by 20 s", ucxProc)
		}
	}
}
