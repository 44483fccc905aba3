package discovery

import (
	"context"
	"testing"
	"time"
)

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		failures int
		max      time.Duration
		want     time.Duration
	}{
		{1, 10 * time.Second, 100 * time.Millisecond},
		{2, 10 * time.Second, 200 * time.Millisecond},
		{4, 10 * time.Second, 800 * time.Millisecond},
		{8, 10 * time.Second, 10 * time.Second},
		{1000, 10 * time.Second, 10 * time.Second},
		{3, 250 * time.Millisecond, 250 * time.Millisecond},
	} {
		if got := RetryDelay(tt.failures, tt.max); got != tt.want {
			t.Errorf("RetryDelay(%d, %v) = %v, want %v", tt.failures, tt.max, got, tt.want)
		}
	}
}

func TestSleepCtx(t *testing.T) {
	t.Parallel()
	if !SleepCtx(t.Context(), time.Millisecond) {
		t.Error("SleepCtx with a live context reported it done")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if SleepCtx(ctx, time.Hour) {
		t.Error("SleepCtx with a cancelled context reported it live")
	}
}
