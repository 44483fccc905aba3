package handler_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/sim"
	"switchyard.dev/libs/worker/handler"
)

// countingDisagg counts Prepare calls (the real decoder runs a remote
// prefill and imports its KV there).
type countingDisagg struct{ calls int }

func (d *countingDisagg) Prepare(context.Context, *engine.Request, string, string, int) (func(), func(*engine.Output)) {
	d.calls++
	return func() {}, func(*engine.Output) {}
}

// An invalid request is refused before a remote prefill is spent on it
// (the prefill worker computed the prompt and sent its KV, then the
// request failed validation).
func TestInvalidRequestSpendsNoRemotePrefill(t *testing.T) {
	t.Parallel()
	ex, err := sim.New(sim.Config{Name: "sim", VocabSize: 32000, ContextLen: 8192})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{}, ex, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	d := &countingDisagg{}
	h := handler.New(handler.Config{Engine: eng, Model: "sim", Disagg: d})
	err = h.Generate(t.Context(), connect.NewRequest(&workerv1.GenerateRequest{Model: "sim", TokenIds: make([]uint32, 4000),
		PrefillWorker: "http://prefill:9100", Stop: &commonv1.StopConditions{MaxTokens: 0}}), nil)
	if connect.CodeOf(err) != connect.CodeInvalidArgument || d.calls != 0 {
		t.Fatalf("code %v after %d remote prefills; want InvalidArgument and none", connect.CodeOf(err), d.calls)
	}
}
