package handler_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/sim"
	"switchyard.dev/libs/worker/handler"
)

// Any GenerateRequest off the wire converts without panicking, and the
// engine either accepts it or rejects it as invalid: a malformed request
// never surfaces as an internal error.
func FuzzEngineRequest(f *testing.F) {
	seed := uint64(3)
	for _, m := range []*workerv1.GenerateRequest{
		{Model: "m", TokenIds: []uint32{1, 2, 3}, Stop: &commonv1.StopConditions{MaxTokens: 4}},
		{TokenIds: []uint32{600}, Sampling: &commonv1.SamplingParams{Temperature: -1, TopP: 2, TopK: 5, Seed: &seed}},
		{Stop: &commonv1.StopConditions{Stop: []string{""}, StopTokenIds: []uint32{1 << 31}}, Hints: &commonv1.Hints{Priority: -5}},
	} {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	exec, err := sim.New(sim.Config{VocabSize: 512, ContextLen: 512})
	if err != nil {
		f.Fatal(err)
	}
	eng, err := engine.New(engine.Config{}, exec, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = eng.Close() })
	cancelled, cancel := context.WithCancel(context.Background())
	cancel() // Submit validates, then refuses to queue
	f.Fuzz(func(t *testing.T, b []byte) {
		var m workerv1.GenerateRequest
		if proto.Unmarshal(b, &m) != nil {
			return
		}
		r := handler.EngineRequest(&m)
		_, err := eng.Submit(cancelled, r)
		if !errors.Is(err, engine.ErrInvalidRequest) && !errors.Is(err, context.Canceled) {
			t.Fatalf("Submit(%+v) = %v; want invalid or cancelled", r, err)
		}
	})
}
