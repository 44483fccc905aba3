package discovery

import (
	"context"
	"time"
)

// SendLatest puts v on ch (capacity 1), replacing an unread older value, so
// a slow reader always finds the newest state. Only one goroutine may send.
func SendLatest(ch chan []Instance, v []Instance) {
	for {
		select {
		case ch <- v:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

// PollWatch runs a watch by calling list every interval and sending when the
// result changes. Errors are retried on the next tick; the last good result
// stays in force meanwhile. It is the watch of backends without push.
func PollWatch(ctx context.Context, interval time.Duration, list func(context.Context) ([]Instance, error)) <-chan []Instance {
	ch := make(chan []Instance, 1)
	go func() {
		defer close(ch)
		var last []Instance
		first := true
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if cur, err := list(ctx); err == nil && (first || !Equal(cur, last)) {
				first = false
				last = cur
				SendLatest(ch, cur)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return ch
}
