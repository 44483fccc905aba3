package nixltest

import (
	"fmt"
	"sync"
	"testing"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
)

// BenchStorage measures WRITEs and READs of one whole segment a transfer,
// at BenchSizes, BenchDepth transfers in flight, each slot its own
// segment and memory (as KV blocks are). A backend's raw baseline (the
// system or SDK calls alone) runs the same shape with RawWindow.
func BenchStorage(b *testing.B, setup StorageSetup) {
	for _, op := range []nixl.Op{nixl.Write, nixl.Read} {
		for _, size := range BenchSizes {
			b.Run(fmt.Sprintf("%s/%s", opName(op), SizeName(size)), func(b *testing.B) { benchStore(b, setup, op, size) })
		}
	}
}

// opName names an op in benchmark names: "Write", "Read".
func opName(op nixl.Op) string {
	if op == nixl.Write {
		return "Write"
	}
	return "Read"
}

func benchStore(b *testing.B, setup StorageSetup, op nixl.Op, size int) {
	s := newStore(b, setup, max(size*BenchDepth, arena.HugePage))
	segs := s.segments(b, BenchDepth, size)
	reqs := make([]nixl.XferRequest, BenchDepth)
	for i := range reqs {
		l, rm := s.whole(segs[i:i+1], size, uint64(i*size))
		// Warm up: store every segment (a READ needs it there) and fault
		// the memory in.
		if err := post(b, s.agent, s.req(nixl.Write, l, rm)); err != nil {
			b.Fatal(err)
		}
		reqs[i] = s.req(op, l, rm)
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	Window(b, s.agent, reqs)
}

// RawWindow is Window's shape for a baseline without an agent: b.N calls
// of do, slots of them in flight, call i on slot i%slots (each slot a
// goroutine of its own, as each in-flight transfer is).
func RawWindow(b *testing.B, slots int, do func(slot int) error) {
	var wg sync.WaitGroup
	errs := make(chan error, slots)
	for slot := range slots {
		wg.Go(func() {
			for i := slot; i < b.N; i += slots {
				if err := do(slot); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}
