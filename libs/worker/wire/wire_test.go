package wire

import (
	"context"
	"errors"
	"testing"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	"switchyard.dev/libs/engine"
)

func TestSamplingRoundTrip(t *testing.T) {
	t.Parallel()
	seed := uint64(7)
	for _, in := range []*commonv1.SamplingParams{
		{},
		{Temperature: 0.7, TopP: 0.9, TopK: 40},
		{Temperature: 1, Seed: &seed},
	} {
		p := Sampling(in)
		out := SamplingProto(p)
		if out.GetTemperature() != in.GetTemperature() || out.GetTopP() != in.GetTopP() || out.GetTopK() != in.GetTopK() ||
			(in.Seed == nil) != (out.Seed == nil) || (in.Seed != nil && *in.Seed != *out.Seed) {
			t.Errorf("%v -> %+v -> %v", in, p, out)
		}
	}
	if p := Sampling(nil); p.Temperature != 0 || p.Seed != nil {
		t.Errorf("nil sampling = %+v, want greedy", p)
	}
}

func TestSubmitError(t *testing.T) {
	t.Parallel()
	live := context.Background()
	canceled, cancel := context.WithCancel(live)
	cancel()
	expired, cancel2 := context.WithTimeout(live, -1)
	defer cancel2()
	for _, tt := range []struct {
		name string
		ctx  context.Context
		err  error
		want connect.Code
	}{
		{"invalid", live, engine.ErrInvalidRequest, connect.CodeInvalidArgument},
		{"stopped", live, engine.ErrStopped, connect.CodeUnavailable},
		{"canceled", canceled, context.Canceled, connect.CodeCanceled},
		{"deadline", expired, context.DeadlineExceeded, connect.CodeDeadlineExceeded},
		{"other", live, errors.New("boom"), connect.CodeInternal},
	} {
		err := SubmitError(tt.ctx, tt.err)
		if got := connect.CodeOf(err); got != tt.want {
			t.Errorf("%s: code %v, want %v (%v)", tt.name, got, tt.want, err)
		}
		if !errors.Is(err, tt.err) {
			t.Errorf("%s: %v does not wrap %v", tt.name, err, tt.err)
		}
	}
	if err := SubmitError(live, engine.ErrStopped); !errors.Is(err, ErrDraining) {
		t.Errorf("stopped: %v does not say the worker drains", err)
	}
}
