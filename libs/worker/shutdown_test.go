package worker_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
)

// On shutdown a generation in flight runs to its end within the drain
// window, and the service exits cleanly.
func TestShutdownFinishesInflight(t *testing.T) {
	t.Parallel()
	w := start(t, "decode", "-executor", "sim", "-drain-timeout", "30s")
	st, err := w.client.Generate(t.Context(), req("sim", []uint32{1, 2, 3}, 60))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() {
		t.Fatal(st.Err())
	}
	n := len(st.Msg().GetTokenIds())
	code := make(chan int, 1)
	go func() { code <- w.Stop(t) }()
	var last *workerv1.GenerateResponse
	for st.Receive() {
		last = st.Msg()
		n += len(last.GetTokenIds())
	}
	if st.Err() != nil || n != 60 || last.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_LENGTH {
		t.Fatalf("after shutdown began: %d tokens, last %v, err %v; want all 60 and LENGTH", n, last, st.Err())
	}
	if c := <-code; c != 0 {
		t.Fatalf("exit code %d; want 0\n%s", c, w.Log())
	}
}

// A generation that outlives the drain window ends with Unavailable (so
// the caller retries elsewhere) and the service still exits cleanly; new
// generations during the drain are refused.
func TestShutdownStopsLongGeneration(t *testing.T) {
	t.Parallel()
	// 2s leaves the server 200ms past the worker's drain window to end the
	// stream with its status, enough on a loaded 2-core machine under -race.
	w := start(t, "decode", "-executor", "sim", "-sim-speedup", "0.05", "-drain-timeout", "2s")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, err := w.client.Generate(ctx, req("sim", []uint32{1, 2, 3}, 5000))
	if err != nil {
		t.Fatal(err)
	}
	if !st.Receive() {
		t.Fatal(st.Err())
	}
	code := make(chan int, 1)
	go func() { code <- w.Stop(t) }()
	for st.Receive() {
	}
	if connect.CodeOf(st.Err()) != connect.CodeUnavailable {
		t.Fatalf("long generation ended with %v; want Unavailable", st.Err())
	}
	if c := <-code; c != 0 {
		t.Fatalf("exit code %d; want 0\n%s", c, w.Log())
	}
}
