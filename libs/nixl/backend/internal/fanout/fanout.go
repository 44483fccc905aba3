// Package fanout runs a storage transfer's I/Os a bounded number at a
// time: storage answers one call at a time per stream, so a transfer
// keeps several in flight, but no more than the caller chose, and stops
// issuing them at the first failure or when the transfer is halted.
package fanout

import (
	"switchyard.dev/libs/nixl"

	"sync"
	"sync/atomic"
)

// Run calls do(i) for every i in [0, n), on at most depth goroutines, and
// returns once every call has returned. No call starts after one has
// failed or once halt returns an error. Run returns the first call's
// error; otherwise halt's error if it kept calls from starting; otherwise
// nil (a halt after the last call started does not fail the work).
func Run(n, depth int, halt func() error, do func(i int) error) error {
	var (
		next     atomic.Int64
		failed   atomic.Bool
		mu       sync.Mutex
		first    error
		haltErr  error
		workerWG sync.WaitGroup
	)
	record := func(dst *error, err error) {
		mu.Lock()
		if *dst == nil {
			*dst = err
		}
		mu.Unlock()
		failed.Store(true)
	}
	work := func() {
		for !failed.Load() {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			if err := halt(); err != nil {
				record(&haltErr, err) // call i never runs
				return
			}
			if err := do(i); err != nil {
				record(&first, err)
			}
		}
	}
	for range min(depth, n) - 1 {
		workerWG.Go(work)
	}
	work()
	workerWG.Wait()
	if first != nil {
		return first
	}
	return haltErr
}

// Halt is the halt of a backend's transfer: nixl.ErrClosed once closed
// is closed (the backend is closing), nixl.ErrCanceled once canceled is
// (the caller cancelled the transfer), else nil.
func Halt(closed, canceled <-chan struct{}) func() error {
	return func() error {
		select {
		case <-closed:
			return nixl.ErrClosed
		case <-canceled:
			return nixl.ErrCanceled
		default:
			return nil
		}
	}
}
