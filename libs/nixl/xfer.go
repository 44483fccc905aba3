package nixl

import (
	"context"
	"sync"
	"time"
)

// Status is a transfer's state as seen by Poll.
type Status int

const (
	// Pending means the transfer is in flight.
	Pending Status = iota
	// Done means every byte has landed (and the notification, if any, is sent).
	Done
	// Failed means the transfer ended with an error, see Err.
	Failed
)

func (s Status) String() string {
	return [...]string{"PENDING", "DONE", "FAILED"}[s]
}

// Xfer is the handle of a posted transfer. Its methods are safe for
// concurrent use.
type Xfer struct {
	done       chan struct{}
	cancel     chan struct{}
	cancelOnce sync.Once
	finishOnce sync.Once
	err        error // written once before done is closed
	onFinish   func(error)
	posted     time.Time
	elapsed    time.Duration
}

func newXfer(onFinish func(error)) *Xfer {
	return &Xfer{
		done:     make(chan struct{}),
		cancel:   make(chan struct{}),
		onFinish: onFinish,
		posted:   time.Now(),
	}
}

// finish records the outcome; later calls are ignored so a misbehaving
// backend cannot corrupt the handle.
func (x *Xfer) finish(err error) {
	x.finishOnce.Do(func() {
		x.err = err
		x.elapsed = time.Since(x.posted)
		// The handle ends before its region accesses are released: a
		// deregistration waiting on them then returns only after the
		// transfer shows as ended. A waiter that deregisters at once waits
		// for the release that follows, which is immediate.
		close(x.done)
		if x.onFinish != nil {
			x.onFinish(err)
		}
	})
}

// Poll returns the current status without blocking.
func (x *Xfer) Poll() Status {
	select {
	case <-x.done:
		if x.err != nil {
			return Failed
		}
		return Done
	default:
		return Pending
	}
}

// Err returns the transfer's error once it has ended (nil while pending).
func (x *Xfer) Err() error {
	select {
	case <-x.done:
		return x.err
	default:
		return nil
	}
}

// Wait blocks until the transfer ends or ctx is done. A ctx error leaves
// the transfer running; Cancel it if it should stop.
func (x *Xfer) Wait(ctx context.Context) error {
	select {
	case <-x.done:
		return x.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitOrCancel waits for the transfer to end; if ctx ends first it cancels
// the transfer and waits for the backend to stop touching the local
// buffers. So it returns only once the buffers are the caller's again,
// whatever the outcome: what a caller reusing a staging buffer needs.
func (x *Xfer) WaitOrCancel(ctx context.Context) error {
	select {
	case <-x.done:
	case <-ctx.Done():
		x.Cancel()
		<-x.done
	}
	return x.err
}

// Done returns a channel closed when the transfer ends.
func (x *Xfer) Done() <-chan struct{} { return x.done }

// Cancel asks the backend to stop. The handle ends (with ErrCanceled unless
// the transfer had already finished) once the backend has stopped touching
// the local buffers; use Wait with a deadline to bound that.
func (x *Xfer) Cancel() { x.cancelOnce.Do(func() { close(x.cancel) }) }

// Elapsed is the time from Post to completion (zero while pending).
func (x *Xfer) Elapsed() time.Duration {
	select {
	case <-x.done:
		return x.elapsed
	default:
		return 0
	}
}
