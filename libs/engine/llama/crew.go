package llama

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// crew runs the parallel phases of one step (two per layer, then the
// classifier) on goroutines that live for the step. Between phases they
// spin (yielding the P) instead of parking: a phase of a small model takes
// tens of microseconds, about what waking a parked thread costs, so
// starting goroutines per phase left a core idle much of the time. They
// spin on an atomic load, yielding now and then (runtime.Gosched takes a
// global lock: yielding on every poll cost more than the wake-ups). The
// goroutines exit when the step ends; an idle executor holds none.
type crew struct {
	size int // parts per phase; the caller runs part 0
	gen  atomic.Uint64
	fn   func(part int)
	left atomic.Int64 // parts of the current phase still running
	pan  atomic.Pointer[crewPanic]
	quit atomic.Bool
	wg   sync.WaitGroup
}

// spinsPerYield bounds a busy wait between yields: short enough that a
// waiter sharing its P with the goroutine it waits for lets it run soon,
// long enough that yields (a global run queue lock each) stay rare.
const spinsPerYield = 1024

// startCrew starts size-1 helpers (none for size 1).
func startCrew(size int) *crew {
	c := &crew{size: max(size, 1)}
	for part := 1; part < c.size; part++ {
		c.wg.Go(func() { c.serve(part) })
	}
	return c
}

func (c *crew) serve(part int) {
	var seen uint64
	for {
		g := c.gen.Load()
		for spins := 0; g == seen; spins++ {
			if c.quit.Load() {
				return
			}
			if spins%spinsPerYield == spinsPerYield-1 {
				runtime.Gosched()
			}
			g = c.gen.Load()
		}
		seen = g
		c.call(part)
		c.left.Add(-1)
	}
}

// crewPanic is a helper's panic, re-raised on the goroutine that ran the
// phase, where the engine recovers a failed step: a panic left on a
// helper goroutine would end the process.
type crewPanic struct {
	part  int
	value any
	stack []byte
}

func (p *crewPanic) String() string {
	return fmt.Sprintf("llama: crew part %d panicked: %v\n%s", p.part, p.value, p.stack)
}

// call runs the phase's part on a helper, recording a panic instead of
// letting it end the process (the first of a phase is kept).
func (c *crew) call(part int) {
	defer func() {
		if r := recover(); r != nil {
			c.pan.CompareAndSwap(nil, &crewPanic{part: part, value: r, stack: debug.Stack()})
		}
	}()
	c.fn(part)
}

// run calls fn(part) for part in [0, size) and returns when all have
// returned; the caller runs part 0. A panic in a helper's part panics
// here, on the caller, once every part has returned.
func (c *crew) run(fn func(part int)) {
	if c.size == 1 {
		fn(0)
		return
	}
	c.fn = fn
	c.pan.Store(nil)
	c.left.Store(int64(c.size - 1))
	c.gen.Add(1) // publishes fn to the helpers
	fn(0)
	for spins := 0; c.left.Load() > 0; spins++ {
		if spins%spinsPerYield == spinsPerYield-1 {
			runtime.Gosched()
		}
	}
	if p := c.pan.Load(); p != nil {
		panic(p.String())
	}
}

// stop ends the helpers once they are idle.
func (c *crew) stop() {
	c.quit.Store(true)
	c.wg.Wait()
}
