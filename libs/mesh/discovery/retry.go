package discovery

import (
	"context"
	"time"
)

// RetryDelay is how long a discovery loop (a backend's watch or
// registration, WatchRoles' re-watch) waits after its failures-th
// consecutive failure: 100ms doubling, capped at maxDelay.
func RetryDelay(failures int, maxDelay time.Duration) time.Duration {
	return min(100*time.Millisecond<<min(failures-1, 10), maxDelay)
}

// LogRetry reports whether a loop's failures-th consecutive failure is
// worth a log line: the first and every tenth, so an outage is reported
// without a line per retry.
func LogRetry(failures int) bool { return failures == 1 || failures%10 == 0 }

// SleepCtx waits d and reports whether ctx is still live.
func SleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
