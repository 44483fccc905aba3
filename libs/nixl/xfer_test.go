package nixl

import (
	"context"
	"errors"
	"testing"
	"time"
)

// WaitOrCancel returns the transfer's own outcome, and when its context
// ends first it cancels and returns only once the backend has let go.
func TestWaitOrCancel(t *testing.T) {
	t.Parallel()
	done := newXfer(nil)
	done.finish(nil)
	if err := done.WaitOrCancel(context.Background()); err != nil {
		t.Fatalf("a finished transfer: %v", err)
	}

	x := newXfer(nil)
	released := make(chan struct{})
	go func() { // a backend that lets go of the buffers only when canceled
		<-x.cancel
		time.Sleep(10 * time.Millisecond)
		close(released)
		x.finish(ErrCanceled)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := x.WaitOrCancel(ctx); !errors.Is(err, ErrCanceled) {
		t.Fatalf("a canceled transfer: %v, want ErrCanceled", err)
	}
	select {
	case <-released:
	default:
		t.Fatal("WaitOrCancel returned before the backend let go of the buffers")
	}
}
