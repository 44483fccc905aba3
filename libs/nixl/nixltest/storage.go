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
	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/metadata"
)

// StorageSetup returns a storage backend's factory and a maker of fresh
// segments for it (a new file, a new object key), for RunStorage and
// BenchStorage.
type StorageSetup func(tb testing.TB) (nixl.StorageFactory, NewSegment)

// NewSegment returns a segment of size bytes that nothing else uses.
type NewSegment func(tb testing.TB, size int) nixl.Segment

// RunStorage runs the contract suite of storage backends. Every WRITE in
// it stores whole segments, which every storage backend takes (an object
// is written whole); READs take any range.
func RunStorage(t *testing.T, setup StorageSetup) {
	t.Run("WriteReadBack", func(t *testing.T) { testStoreReadBack(t, setup) })
	t.Run("ManyBlocks", func(t *testing.T) { testStoreManyBlocks(t, setup) })
	t.Run("PostValidation", func(t *testing.T) { testStoreValidation(t, setup) })
	t.Run("Cancel", func(t *testing.T) { testStoreCancel(t, setup) })
	t.Run("Concurrent", func(t *testing.T) { testStoreConcurrent(t, setup) })
	t.Run("Deregister", func(t *testing.T) { testStoreDeregister(t, setup) })
	t.Run("CloseMidTransfer", func(t *testing.T) { testStoreClose(t, setup) })
}

// store is an agent with storage only and one registered arena.
type store struct {
	agent  *nixl.Agent
	arena  *arena.Arena
	region nixl.RegionID
	newSeg NewSegment
}

func newStore(tb testing.TB, setup StorageSetup, memSize int) *store {
	tb.Helper()
	f, newSeg := setup(tb)
	a, err := nixl.NewAgent(nixl.Config{Name: "self", Storage: []nixl.StorageFactory{f}})
	if err != nil {
		tb.Fatal(err)
	}
	ar, err := arena.Map(memSize)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { // the agent first: its backend may still touch the arena
		_ = a.Close()
		_ = ar.Close()
	})
	id, err := a.RegisterMemory(ar.Bytes())
	if err != nil {
		tb.Fatal(err)
	}
	return &store{agent: a, arena: ar, region: id, newSeg: newSeg}
}

func (s *store) mem() []byte { return s.arena.Bytes() }

// segments registers n fresh segments of size bytes.
func (s *store) segments(tb testing.TB, n, size int) []nixl.RegionID {
	tb.Helper()
	ids := make([]nixl.RegionID, n)
	for i := range ids {
		id, err := s.agent.RegisterStorage(s.newSeg(tb, size))
		if err != nil {
			tb.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

// whole returns the descriptors that move segs, each size bytes, from or
// to local memory at base, back to back.
func (s *store) whole(segs []nixl.RegionID, size int, base uint64) (local, remote []nixl.Desc) {
	for i, id := range segs {
		local = append(local, nixl.Desc{Region: s.region, Offset: base + uint64(i*size), Len: uint64(size)})
		remote = append(remote, nixl.Desc{Region: id, Len: uint64(size)})
	}
	return local, remote
}

func (s *store) req(op nixl.Op, local, remote []nixl.Desc) nixl.XferRequest {
	return nixl.XferRequest{Op: op, Peer: s.agent.Name(), Local: local, Remote: remote}
}

func testStoreReadBack(t *testing.T, setup StorageSetup) {
	const nseg, size = 4, 1<<20 + 4096 + 7 // a tail that aligns to nothing
	s := newStore(t, setup, 4<<20+2*nseg*size)
	r := rand.New(rand.NewPCG(1, 2))
	segs := s.segments(t, nseg, size)
	src := s.mem()[:nseg*size]
	fill(r, src)
	l, rm := s.whole(segs, size, 0)
	if err := post(t, s.agent, s.req(nixl.Write, l, rm)); err != nil {
		t.Fatalf("write: %v", err)
	}
	// Read back into fresh memory, each segment in random cuts.
	dst := uint64(nseg*size + 4096)
	l, rm = nil, nil
	for i, id := range segs {
		sl, sr := descs(r, s.region, id, size, 37, 0)
		for j := range sl {
			sl[j].Offset += dst + uint64(i*size)
		}
		l, rm = append(l, sl...), append(rm, sr...)
	}
	if err := post(t, s.agent, s.req(nixl.Read, l, rm)); err != nil {
		t.Fatalf("read: %v", err)
	}
	if !bytes.Equal(s.mem()[dst:dst+uint64(nseg*size)], src) {
		t.Fatal("READ returned different bytes")
	}
	// Storage is the agent's own: its metadata lists memory only.
	blob, err := s.agent.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.Decode(blob)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Regions) != 1 || md.Regions[0].ID != uint32(s.region) {
		t.Fatalf("metadata lists regions %+v, want only memory region %d", md.Regions, s.region)
	}
}

// testStoreManyBlocks stores scattered memory blocks as segments in one
// transfer and loads them back, reversed, in one: the shape of a KV
// offload and onboarding.
func testStoreManyBlocks(t *testing.T, setup StorageSetup) {
	const n, size = 200, 4096
	s := newStore(t, setup, 4*n*size)
	r := rand.New(rand.NewPCG(3, 4))
	fill(r, s.mem()[:2*n*size])
	segs := s.segments(t, n, size)
	perm := r.Perm(2 * n)
	local := make([]nixl.Desc, n)
	_, remote := s.whole(segs, size, 0)
	for i := range n {
		local[i] = nixl.Desc{Region: s.region, Offset: uint64(perm[i] * size), Len: size}
	}
	if err := post(t, s.agent, s.req(nixl.Write, local, remote)); err != nil {
		t.Fatalf("write: %v", err)
	}
	back := 2 * n * size
	want := make([][]byte, n)
	for i := range local {
		want[i] = s.mem()[local[i].Offset : local[i].Offset+size]
		local[i].Offset = uint64(back + (n-1-i)*size)
	}
	if err := post(t, s.agent, s.req(nixl.Read, local, remote)); err != nil {
		t.Fatalf("read: %v", err)
	}
	for i := range n {
		if !bytes.Equal(s.mem()[back+(n-1-i)*size:back+(n-i)*size], want[i]) {
			t.Fatalf("block %d read back wrong", i)
		}
	}
}

func testStoreValidation(t *testing.T, setup StorageSetup) {
	s := newStore(t, setup, 1<<20)
	seg := s.segments(t, 1, 8192)[0]
	d := func(id nixl.RegionID, off, n uint64) []nixl.Desc {
		return []nixl.Desc{{Region: id, Offset: off, Len: n}}
	}
	self := s.agent.Name()
	for _, tc := range []struct {
		name string
		req  nixl.XferRequest
		want error // nil: any error
	}{
		{"len mismatch", nixl.XferRequest{Op: nixl.Read, Peer: self, Local: d(s.region, 0, 8), Remote: d(seg, 0, 9)}, nixl.ErrLenMismatch},
		{"count mismatch", nixl.XferRequest{Op: nixl.Read, Peer: self, Local: d(s.region, 0, 8)}, nixl.ErrLenMismatch},
		{"storage out of range", nixl.XferRequest{Op: nixl.Read, Peer: self, Local: d(s.region, 0, 8), Remote: d(seg, 8190, 8)}, nixl.ErrOutOfRange},
		{"offset overflow", nixl.XferRequest{Op: nixl.Read, Peer: self, Local: d(s.region, 0, 8), Remote: d(seg, ^uint64(0)-3, 8)}, nixl.ErrOutOfRange},
		{"local out of range", nixl.XferRequest{Op: nixl.Read, Peer: self, Local: d(s.region, 1<<20-4, 8), Remote: d(seg, 0, 8)}, nixl.ErrOutOfRange},
		{"unknown storage", nixl.XferRequest{Op: nixl.Read, Peer: self, Local: d(s.region, 0, 8), Remote: d(99, 0, 8)}, nixl.ErrUnknownRegion},
		{"memory as storage", nixl.XferRequest{Op: nixl.Write, Peer: self, Local: d(s.region, 0, 8), Remote: d(s.region, 64, 8)}, nixl.ErrUnknownRegion},
		{"storage as memory", nixl.XferRequest{Op: nixl.Write, Peer: self, Local: d(seg, 0, 8), Remote: d(seg, 0, 8)}, nixl.ErrUnknownRegion},
		{"notification", nixl.XferRequest{Op: nixl.Read, Peer: self, Local: d(s.region, 0, 8), Remote: d(seg, 0, 8), Notif: []byte("x")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.agent.Post(tc.req)
			if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Post err = %v, want %v", err, tc.want)
			}
		})
	}
	other := nixl.Segment(nixl.ObjectSegment{Key: "k", Len: 1})
	if s.newSeg(t, 1).Kind() == nixl.ObjSeg {
		other = nixl.FileSegment{Len: 1}
	}
	if _, err := s.agent.RegisterStorage(other); !errors.Is(err, nixl.ErrNoBackend) {
		t.Fatalf("RegisterStorage(%v) with no backend for it: %v, want ErrNoBackend", other.Kind(), err)
	}
	if err := s.agent.DeregisterMemory(t.Context(), seg); !errors.Is(err, nixl.ErrUnknownRegion) {
		t.Fatalf("DeregisterMemory(storage): %v, want ErrUnknownRegion", err)
	}
	if err := s.agent.DeregisterStorage(t.Context(), s.region); !errors.Is(err, nixl.ErrUnknownRegion) {
		t.Fatalf("DeregisterStorage(memory): %v, want ErrUnknownRegion", err)
	}
	// Nothing moved: an empty transfer ends at once.
	if err := post(t, s.agent, s.req(nixl.Read, d(s.region, 0, 0), d(seg, 0, 0))); err != nil {
		t.Fatalf("empty transfer: %v", err)
	}
}

func testStoreCancel(t *testing.T, setup StorageSetup) {
	const nseg, size = 8, 4 << 20
	s := newStore(t, setup, 2*nseg*size)
	fill(rand.New(rand.NewPCG(5, 6)), s.mem()[:nseg*size])
	segs := s.segments(t, nseg, size)
	l, rm := s.whole(segs, size, 0)
	if err := post(t, s.agent, s.req(nixl.Write, l, rm)); err != nil {
		t.Fatal(err)
	}
	back, _ := s.whole(segs, size, nseg*size)
	for i := range 3 {
		x, err := s.agent.Post(s.req([]nixl.Op{nixl.Read, nixl.Write}[i%2], back, rm))
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
	// The backend stays usable: the segments are intact or whole rewrites.
	if err := post(t, s.agent, s.req(nixl.Write, l, rm)); err != nil {
		t.Fatalf("write after cancel: %v", err)
	}
	if err := post(t, s.agent, s.req(nixl.Read, back, rm)); err != nil {
		t.Fatalf("read after cancel: %v", err)
	}
	if !bytes.Equal(s.mem()[:nseg*size], s.mem()[nseg*size:2*nseg*size]) {
		t.Fatal("read after cancel returned different bytes")
	}
}

func testStoreConcurrent(t *testing.T, setup StorageSetup) {
	const workers, size = 8, 256 << 10
	s := newStore(t, setup, 2*workers*size)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		seg := s.segments(t, 1, size)
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 9))
			base := uint64(2 * w * size)
			src := s.mem()[base : base+size]
			fill(r, src)
			l, rm := s.whole(seg, size, base)
			if err := post(t, s.agent, s.req(nixl.Write, l, rm)); err != nil {
				errs <- fmt.Errorf("worker %d write: %w", w, err)
				return
			}
			l, rm = descs(r, s.region, seg[0], size, 16, 0)
			for i := range l {
				l[i].Offset += base + size
			}
			if err := post(t, s.agent, s.req(nixl.Read, l, rm)); err != nil {
				errs <- fmt.Errorf("worker %d read: %w", w, err)
				return
			}
			if !bytes.Equal(s.mem()[base+size:base+2*size], src) {
				errs <- fmt.Errorf("worker %d: data differs", w)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// testStoreDeregister: deregistering waits for the transfer in flight,
// and the region takes no more.
func testStoreDeregister(t *testing.T, setup StorageSetup) {
	const size = 8 << 20
	s := newStore(t, setup, size)
	seg := s.segments(t, 1, size)
	l, rm := s.whole(seg, size, 0)
	x, err := s.agent.Post(s.req(nixl.Write, l, rm))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.agent.DeregisterStorage(ctxT(t), seg[0]); err != nil {
		t.Fatal(err)
	}
	if x.Poll() == nixl.Pending {
		t.Fatal("DeregisterStorage returned while a transfer on the region was in flight")
	}
	if err := x.Err(); err != nil {
		t.Fatalf("transfer during deregistration: %v", err)
	}
	if _, err := s.agent.Post(s.req(nixl.Read, l, rm)); !errors.Is(err, nixl.ErrUnknownRegion) {
		t.Fatalf("Post to a deregistered region: %v, want ErrUnknownRegion", err)
	}
	if err := s.agent.DeregisterStorage(ctxT(t), seg[0]); !errors.Is(err, nixl.ErrUnknownRegion) {
		t.Fatalf("second DeregisterStorage: %v, want ErrUnknownRegion", err)
	}
}

// testStoreClose: closing the agent ends the transfer in flight before
// Close returns, so the caller may unmap its memory then.
func testStoreClose(t *testing.T, setup StorageSetup) {
	const nseg, size = 8, 2 << 20
	s := newStore(t, setup, nseg*size)
	l, rm := s.whole(s.segments(t, nseg, size), size, 0)
	x, err := s.agent.Post(s.req(nixl.Write, l, rm))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.agent.Close(); err != nil {
		t.Fatal(err)
	}
	if x.Poll() == nixl.Pending {
		t.Fatal("agent Close returned with a storage transfer in flight")
	}
	if err := x.Err(); err != nil && !errors.Is(err, nixl.ErrClosed) {
		t.Fatalf("transfer cut by Close: %v, want nil or ErrClosed", err)
	}
	if _, err := s.agent.Post(s.req(nixl.Read, l, rm)); !errors.Is(err, nixl.ErrClosed) {
		t.Fatalf("Post after Close: %v, want ErrClosed", err)
	}
	if err := s.agent.DeregisterStorage(context.Background(), rm[0].Region); err != nil {
		t.Fatalf("DeregisterStorage after Close: %v", err)
	}
}
