package wire

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/sample"
)

func TestSamplingRoundTrip(t *testing.T) {
	t.Parallel()
	seed := uint64(7)
	for _, in := range []*commonv1.SamplingParams{
		{},
		{Temperature: 0.7, TopP: 0.9, TopK: 40},
		{Temperature: 1, Seed: &seed},
		{Logprobs: true, TopLogprobs: 3},
		{PresencePenalty: 0.5, FrequencyPenalty: -1.25},
		{LogitBias: map[uint32]float32{5: 10, 0: -100, 511: 0.5}},
		{Constraint: &commonv1.OutputConstraint{Kind: &commonv1.OutputConstraint_JsonObject{JsonObject: &commonv1.JsonObject{}}}},
		{Constraint: &commonv1.OutputConstraint{Kind: &commonv1.OutputConstraint_JsonSchema{JsonSchema: `{"type":"object"}`}}},
	} {
		p := Sampling(in)
		out := SamplingProto(p)
		if !proto.Equal(in, out) {
			t.Errorf("%v -> %+v -> %v", in, p, out)
		}
		if again := Sampling(out); !reflect.DeepEqual(again, p) {
			t.Errorf("%+v -> %v -> %+v", p, out, again)
		}
	}
	if p := Sampling(nil); !reflect.DeepEqual(p, sample.Params{}) {
		t.Errorf("nil sampling = %+v, want greedy", p)
	}
	// An empty map is no bias both ways, and neither side aliases the
	// other's map.
	if p := Sampling(&commonv1.SamplingParams{LogitBias: map[uint32]float32{}}); p.LogitBias != nil {
		t.Errorf("empty logit_bias = %v, want nil", p.LogitBias)
	}
	if m := SamplingProto(sample.Params{LogitBias: map[uint32]float32{}}); m.LogitBias != nil {
		t.Errorf("empty LogitBias = %v, want nil", m.LogitBias)
	}
	in := &commonv1.SamplingParams{LogitBias: map[uint32]float32{1: 2}}
	p := Sampling(in)
	in.LogitBias[1] = 3
	out := SamplingProto(p)
	p.LogitBias[1] = 4
	if out.LogitBias[1] != 2 {
		t.Errorf("the conversions alias the bias map: %v", out.LogitBias)
	}
}

// TestUnhonoured: a constraint Sampling would read as free text is
// refused, naming the field; everything else is left to the engine.
func TestUnhonoured(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   *commonv1.SamplingParams
		ok   bool
	}{
		{"nil", nil, true},
		{"no constraint", &commonv1.SamplingParams{PresencePenalty: 1, LogitBias: map[uint32]float32{1: 1}}, true},
		{"json object", &commonv1.SamplingParams{Constraint: &commonv1.OutputConstraint{Kind: &commonv1.OutputConstraint_JsonObject{}}}, true},
		{"json schema", &commonv1.SamplingParams{Constraint: &commonv1.OutputConstraint{Kind: &commonv1.OutputConstraint_JsonSchema{JsonSchema: "{}"}}}, true},
		{"no kind", &commonv1.SamplingParams{Constraint: &commonv1.OutputConstraint{}}, false},
		{"empty schema", &commonv1.SamplingParams{Constraint: &commonv1.OutputConstraint{Kind: &commonv1.OutputConstraint_JsonSchema{}}}, false},
	} {
		err := Unhonoured(tc.in)
		if tc.ok != (err == nil) {
			t.Errorf("%s: Unhonoured = %v, want ok=%v", tc.name, err, tc.ok)
			continue
		}
		if err != nil && (connect.CodeOf(err) != connect.CodeInvalidArgument || engine.InvalidField(err) != "sampling.constraint") {
			t.Errorf("%s: %v: code %v field %q", tc.name, err, connect.CodeOf(err), engine.InvalidField(err))
		}
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
