package handler_test

import (
	"testing"
	"time"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/worker/handler"
)

// TestEngineRequestArrival: the arrival the frontend passes on (the
// router's decision) reaches the engine; none, or a negative one, means
// at Submit.
func TestEngineRequestArrival(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		nanos int64
		want  time.Time
	}{
		{1_700_000_000_000_000_123, time.Unix(0, 1_700_000_000_000_000_123)},
		{0, time.Time{}},
		{-5, time.Time{}},
	} {
		got := handler.EngineRequest(&workerv1.GenerateRequest{ArrivalUnixNanos: tc.nanos}).Arrival
		if !got.Equal(tc.want) || got.IsZero() != tc.want.IsZero() {
			t.Errorf("arrival_unix_nanos %d: engine arrival %v, want %v", tc.nanos, got, tc.want)
		}
	}
}
