package nixltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/metadata"
)

const arenaSize = 8 << 20

// Run runs the contract suite.
func Run(t *testing.T, setup Setup, caps Caps) {
	t.Run("WriteReadBack", func(t *testing.T) { testWriteReadBack(t, setup, caps) })
	t.Run("ManyBlocks", func(t *testing.T) { testManyBlocks(t, setup) })
	t.Run("PostValidation", func(t *testing.T) { testPostValidation(t, setup) })
	t.Run("RemoteValidation", func(t *testing.T) {
		if !caps.RemoteValidation {
			t.Skip("one-sided backend: target does not validate accesses")
		}
		testRemoteValidation(t, setup)
	})
	t.Run("PeerClosed", func(t *testing.T) {
		if caps.NoPeerFailure {
			t.Skip("backend cannot detect a departed peer")
		}
		testPeerClosed(t, setup)
	})
	t.Run("Cancel", func(t *testing.T) { testCancel(t, setup) })
	t.Run("Notifications", func(t *testing.T) { testNotifications(t, setup) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, setup) })
	t.Run("Rejoin", func(t *testing.T) { testRejoin(t, setup) })
}

func fill(r *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

func testWriteReadBack(t *testing.T, setup Setup, caps Caps) {
	init, target := pair(t, setup, arenaSize)
	r := rand.New(rand.NewPCG(1, 2))
	const total, base = 3 << 20, 4096 + 7
	src := init.mem()[:total]
	fill(r, src)
	l, rm := descs(r, init.region, target.region, total, 200, base)
	if err := post(t, init.agent, nixl.XferRequest{Op: nixl.Write, Peer: "target", Local: l, Remote: rm}); err != nil {
		t.Fatalf("write: %v", err)
	}
	if got := init.agent.Backend("target"); caps.Backend != "" && got != caps.Backend {
		t.Fatalf("backend = %q, want %q", got, caps.Backend)
	}
	if !bytes.Equal(target.mem()[base:base+total], src) {
		t.Fatal("target memory differs after WRITE")
	}
	// Read back into a fresh part of the local arena, with different cuts.
	const dst = 4 << 20
	l, rm = descs(r, init.region, target.region, total, 97, base)
	for i := range l {
		l[i].Offset += dst
	}
	if err := post(t, init.agent, nixl.XferRequest{Op: nixl.Read, Peer: "target", Local: l, Remote: rm}); err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(init.mem()[dst:dst+total], src) {
		t.Fatal("READ returned different bytes")
	}
}

// testManyBlocks moves thousands of small scattered blocks in one
// transfer each way, as a KV import of a long prompt does: a backend that
// batches small descriptors must still put every byte in its place.
func testManyBlocks(t *testing.T, setup Setup) {
	const n, size = 3000, 64
	init, target := pair(t, setup, 4*n*size)
	r := rand.New(rand.NewPCG(3, 4))
	fill(r, init.mem()[:n*size])
	perm := r.Perm(2 * n) // remote slots: a scattered half of 2n
	local := make([]nixl.Desc, n)
	remote := make([]nixl.Desc, n)
	for i := range n {
		local[i] = nixl.Desc{Region: init.region, Offset: uint64(i * size), Len: size}
		remote[i] = nixl.Desc{Region: target.region, Offset: uint64(perm[i] * size), Len: size}
	}
	if err := post(t, init.agent, nixl.XferRequest{Op: nixl.Write, Peer: "target", Local: local, Remote: remote}); err != nil {
		t.Fatalf("write: %v", err)
	}
	for i, d := range remote {
		if got, want := target.mem()[d.Offset:d.Offset+size], init.mem()[i*size:(i+1)*size]; !bytes.Equal(got, want) {
			t.Fatalf("block %d landed wrong at remote offset %d", i, d.Offset)
		}
	}
	back := 2 * n * size // read them back, reversed, into fresh local memory
	for i := range local {
		local[i].Offset = uint64(back + (n-1-i)*size)
	}
	if err := post(t, init.agent, nixl.XferRequest{Op: nixl.Read, Peer: "target", Local: local, Remote: remote}); err != nil {
		t.Fatalf("read: %v", err)
	}
	for i := range n {
		if got, want := init.mem()[back+(n-1-i)*size:back+(n-i)*size], init.mem()[i*size:(i+1)*size]; !bytes.Equal(got, want) {
			t.Fatalf("block %d read back wrong", i)
		}
	}
}

func testPostValidation(t *testing.T, setup Setup) {
	init, target := pair(t, setup, 1<<20)
	d := func(id nixl.RegionID, off, n uint64) []nixl.Desc {
		return []nixl.Desc{{Region: id, Offset: off, Len: n}}
	}
	for _, tc := range []struct {
		name string
		req  nixl.XferRequest
		want error
	}{
		{"unknown peer", nixl.XferRequest{Op: nixl.Write, Peer: "nobody", Local: d(init.region, 0, 8), Remote: d(target.region, 0, 8)}, nixl.ErrUnknownPeer},
		{"count mismatch", nixl.XferRequest{Op: nixl.Write, Peer: "target", Local: d(init.region, 0, 8)}, nixl.ErrLenMismatch},
		{"len mismatch", nixl.XferRequest{Op: nixl.Write, Peer: "target", Local: d(init.region, 0, 8), Remote: d(target.region, 0, 9)}, nixl.ErrLenMismatch},
		{"local out of range", nixl.XferRequest{Op: nixl.Read, Peer: "target", Local: d(init.region, 1<<20-4, 8), Remote: d(target.region, 0, 8)}, nixl.ErrOutOfRange},
		{"remote out of range", nixl.XferRequest{Op: nixl.Read, Peer: "target", Local: d(init.region, 0, 8), Remote: d(target.region, 1<<20, 8)}, nixl.ErrOutOfRange},
		{"offset overflow", nixl.XferRequest{Op: nixl.Read, Peer: "target", Local: d(init.region, 0, 8), Remote: d(target.region, ^uint64(0)-3, 8)}, nixl.ErrOutOfRange},
		{"unknown local region", nixl.XferRequest{Op: nixl.Write, Peer: "target", Local: d(99, 0, 8), Remote: d(target.region, 0, 8)}, nixl.ErrUnknownRegion},
		{"unknown remote region", nixl.XferRequest{Op: nixl.Write, Peer: "target", Local: d(init.region, 0, 8), Remote: d(99, 0, 8)}, nixl.ErrUnknownRegion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := init.agent.Post(tc.req); !errors.Is(err, tc.want) {
				t.Fatalf("Post err = %v, want %v", err, tc.want)
			}
		})
	}
}

// testRemoteValidation feeds the initiator metadata that no longer matches
// the target; the target must refuse, and the handle must say so.
func testRemoteValidation(t *testing.T, setup Setup) {
	init, target := pair(t, setup, 1<<20)
	blob, err := target.agent.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.Decode(blob)
	if err != nil {
		t.Fatal(err)
	}
	md.Regions[0].Len = 1 << 30 // lie: the region is 1 MiB
	md.Regions = append(md.Regions, metadata.Region{ID: 77, Len: 1 << 20, Keys: md.Regions[0].Keys})
	if blob, err = metadata.Encode(md); err != nil {
		t.Fatal(err)
	}
	if _, err := init.agent.LoadRemoteMetadata(blob); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		op     nixl.Op
		remote nixl.Desc
		want   error
	}{
		{"write out of range", nixl.Write, nixl.Desc{Region: target.region, Offset: 2 << 20, Len: 64}, nixl.ErrOutOfRange},
		{"read out of range", nixl.Read, nixl.Desc{Region: target.region, Offset: 1<<20 - 8, Len: 64}, nixl.ErrOutOfRange},
		{"write unknown region", nixl.Write, nixl.Desc{Region: 77, Offset: 0, Len: 64}, nixl.ErrUnknownRegion},
		{"read unknown region", nixl.Read, nixl.Desc{Region: 77, Offset: 0, Len: 64}, nixl.ErrUnknownRegion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := post(t, init.agent, nixl.XferRequest{Op: tc.op, Peer: "target",
				Local: []nixl.Desc{{Region: init.region, Len: 64}}, Remote: []nixl.Desc{tc.remote}})
			if !errors.Is(err, tc.want) {
				t.Fatalf("handle err = %v, want %v", err, tc.want)
			}
		})
	}
	// One bad block among many small ones fails the whole transfer.
	many := make([]nixl.Desc, 1000)
	local := make([]nixl.Desc, len(many))
	for i := range many {
		many[i] = nixl.Desc{Region: target.region, Offset: uint64(i * 64), Len: 64}
		local[i] = nixl.Desc{Region: init.region, Offset: uint64(i * 64), Len: 64}
	}
	many[700].Offset = 2 << 20
	if err := post(t, init.agent, nixl.XferRequest{Op: nixl.Write, Peer: "target", Local: local, Remote: many}); !errors.Is(err, nixl.ErrOutOfRange) {
		t.Fatalf("write with one bad block among 1,000: err = %v, want %v", err, nixl.ErrOutOfRange)
	}
	// The connection survives rejected requests.
	err = post(t, init.agent, nixl.XferRequest{Op: nixl.Write, Peer: "target",
		Local: []nixl.Desc{{Region: init.region, Len: 64}}, Remote: []nixl.Desc{{Region: target.region, Len: 64}}})
	if err != nil {
		t.Fatalf("valid write after rejections: %v", err)
	}
}

func testPeerClosed(t *testing.T, setup Setup) {
	init, target := pair(t, setup, 32<<20)
	l, rm := descs(rand.New(rand.NewPCG(3, 4)), init.region, target.region, 32<<20, 64, 0)
	x, err := init.agent.Post(nixl.XferRequest{Op: nixl.Write, Peer: "target", Local: l, Remote: rm, Notif: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if err := target.agent.Close(); err != nil {
		t.Fatal(err)
	}
	// The in-flight transfer may have finished before the close; either
	// way it must end, not hang.
	if err := x.Wait(ctxT(t)); isCtxErr(err) {
		t.Fatalf("in-flight transfer did not end: %v", err)
	}
	err = post(t, init.agent, nixl.XferRequest{Op: nixl.Write, Peer: "target", Local: l[:1], Remote: rm[:1], Notif: []byte("y")})
	if err == nil {
		t.Fatal("transfer to a closed peer succeeded")
	}
	if isCtxErr(err) {
		t.Fatalf("transfer to a closed peer hung: %v", err)
	}
}

// isCtxErr reports a wait that ran out of time: the hang the suite exists
// to catch.
func isCtxErr(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

func testCancel(t *testing.T, setup Setup) {
	init, target := pair(t, setup, 32<<20)
	l, rm := descs(rand.New(rand.NewPCG(5, 6)), init.region, target.region, 32<<20, 512, 0)
	for i := range 5 {
		x, err := init.agent.Post(nixl.XferRequest{Op: nixl.Write, Peer: "target", Local: l, Remote: rm, Notif: []byte("never")})
		if err != nil {
			t.Fatal(err)
		}
		x.Cancel()
		err = x.Wait(ctxT(t))
		if err != nil && !errors.Is(err, nixl.ErrCanceled) {
			t.Fatalf("round %d: canceled transfer ended with %v", i, err)
		}
		if (err == nil) != (x.Poll() == nixl.Done) {
			t.Fatalf("round %d: Poll %v disagrees with Wait %v", i, x.Poll(), err)
		}
	}
	// Canceled transfers leave the connection usable.
	if err := post(t, init.agent, nixl.XferRequest{Op: nixl.Read, Peer: "target", Local: l[:3], Remote: rm[:3]}); err != nil {
		t.Fatalf("transfer after cancel: %v", err)
	}
}

func testNotifications(t *testing.T, setup Setup) {
	init, target := pair(t, setup, 1<<20)
	var pending []nixl.Notif
	for i := range 3 {
		msg := []byte(fmt.Sprintf("block-%d", i))
		op := []nixl.Op{nixl.Write, nixl.Read}[i%2]
		if err := post(t, init.agent, nixl.XferRequest{Op: op, Peer: "target",
			Local:  []nixl.Desc{{Region: init.region, Offset: 0, Len: 4096}},
			Remote: []nixl.Desc{{Region: target.region, Offset: 8192, Len: 4096}}, Notif: msg}); err != nil {
			t.Fatal(err)
		}
		got := waitNotif(t, target, &pending)
		if got.From != "init" || !bytes.Equal(got.Msg, msg) {
			t.Fatalf("notif = %q from %q, want %q from init", got.Msg, got.From, msg)
		}
	}
	// A notification with no descriptors is a pure message.
	if err := post(t, init.agent, nixl.XferRequest{Op: nixl.Write, Peer: "target", Notif: []byte("ping")}); err != nil {
		t.Fatal(err)
	}
	if got := waitNotif(t, target, &pending); string(got.Msg) != "ping" {
		t.Fatalf("notif = %q, want ping", got.Msg)
	}
}

func testConcurrent(t *testing.T, setup Setup) {
	init, target := pair(t, setup, arenaSize)
	const workers, slice = 8, 256 << 10
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 9))
			base := uint64(w * 2 * slice)
			src := init.mem()[base : base+slice]
			fill(r, src)
			l, rm := descs(r, init.region, target.region, slice, 16, 0)
			for i := range l {
				l[i].Offset += base
				rm[i].Offset += base
			}
			if err := post(t, init.agent, nixl.XferRequest{Op: nixl.Write, Peer: "target", Local: l, Remote: rm, Notif: []byte{byte(w)}}); err != nil {
				errs <- fmt.Errorf("worker %d write: %w", w, err)
				return
			}
			for i := range l {
				l[i].Offset += slice
			}
			if err := post(t, init.agent, nixl.XferRequest{Op: nixl.Read, Peer: "target", Local: l, Remote: rm}); err != nil {
				errs <- fmt.Errorf("worker %d read: %w", w, err)
				return
			}
			if !bytes.Equal(init.mem()[base+slice:base+2*slice], src) {
				errs <- fmt.Errorf("worker %d: data differs", w)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var pending []nixl.Notif
	seen := map[byte]bool{}
	for range workers {
		seen[waitNotif(t, target, &pending).Msg[0]] = true
	}
	if len(seen) != workers {
		t.Fatalf("got notifications from %d workers, want %d", len(seen), workers)
	}
}

func testRejoin(t *testing.T, setup Setup) {
	init, target := pair(t, setup, 1<<20)
	req := nixl.XferRequest{Op: nixl.Write, Peer: "target",
		Local: []nixl.Desc{{Region: init.region, Len: 512}}, Remote: []nixl.Desc{{Region: target.region, Len: 512}}}
	if err := post(t, init.agent, req); err != nil {
		t.Fatal(err)
	}
	init.agent.Invalidate("target")
	if _, err := init.agent.Post(req); !errors.Is(err, nixl.ErrUnknownPeer) {
		t.Fatalf("Post after Invalidate: %v, want ErrUnknownPeer", err)
	}
	exchange(t, init, target)
	if err := post(t, init.agent, req); err != nil {
		t.Fatalf("Post after reload: %v", err)
	}
}
