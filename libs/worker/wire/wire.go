// Package wire converts between the worker's RPC messages and the engine's
// types and maps engine errors to Connect codes. Both the Generate handler
// and the disaggregated prefill path put engine work behind an RPC; one
// mapping keeps their sampling and their error codes the same.
package wire

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/sample"
)

// ErrDraining is returned (as Unavailable) by a worker that is shutting
// down: the caller should retry elsewhere.
var ErrDraining = errors.New("worker is shutting down; retry on another worker")

// Sampling converts sampling parameters (nil means greedy defaults).
func Sampling(s *commonv1.SamplingParams) sample.Params {
	p := sample.Params{Temperature: s.GetTemperature(), TopP: s.GetTopP(), TopK: int(s.GetTopK()),
		Logprobs: s.GetLogprobs(), TopLogprobs: int(min(s.GetTopLogprobs(), math.MaxInt32))}
	if s != nil && s.Seed != nil {
		seed := *s.Seed
		p.Seed = &seed
	}
	return p
}

// Unhonoured refuses, as InvalidArgument naming the field, sampling
// parameters the wire carries but this worker's engine does not apply
// yet (penalties, logit_bias, output constraints): a request that asked
// for them must not come back as if they were absent.
func Unhonoured(s *commonv1.SamplingParams) error {
	var field string
	switch {
	case s.GetPresencePenalty() != 0:
		field = "sampling.presence_penalty"
	case s.GetFrequencyPenalty() != 0:
		field = "sampling.frequency_penalty"
	case len(s.GetLogitBias()) > 0:
		field = "sampling.logit_bias"
	case s.GetConstraint() != nil:
		field = "sampling.constraint"
	default:
		return nil
	}
	return InvalidArgument(&engine.FieldError{Field: field,
		Err: fmt.Errorf("%w: %s is not supported by this worker", engine.ErrInvalidSampling, field)})
}

// Arrival is a request's arrival in the serving system from its wire form
// (Unix nanoseconds); zero, which the engine reads as "at Submit", when
// the caller sent none.
func Arrival(unixNanos int64) time.Time {
	if unixNanos <= 0 {
		return time.Time{}
	}
	return time.Unix(0, unixNanos)
}

// SamplingProto is the inverse of Sampling.
func SamplingProto(p sample.Params) *commonv1.SamplingParams {
	out := &commonv1.SamplingParams{Temperature: p.Temperature, TopP: p.TopP, TopK: uint32(max(p.TopK, 0)),
		Logprobs: p.Logprobs, TopLogprobs: uint32(max(p.TopLogprobs, 0))}
	if p.Seed != nil {
		seed := *p.Seed
		out.Seed = &seed
	}
	return out
}

// SubmitError maps an error from engine.Submit: invalid requests are
// InvalidArgument, a stopping engine Unavailable (ErrDraining), a caller
// gone Canceled or DeadlineExceeded, anything else Internal.
func SubmitError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, engine.ErrInvalidRequest):
		return InvalidArgument(err)
	case errors.Is(err, engine.ErrStopped):
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%w: %w", ErrDraining, err))
	case ctx.Err() != nil:
		return ContextError(ctx, err)
	}
	return connect.NewError(connect.CodeInternal, fmt.Errorf("submit: %w", err))
}

// FinishError maps the error of an engine output that finished with
// engine.FinishError: no KV room ever ResourceExhausted, a stopping engine
// Unavailable (ErrDraining), an invalid request InvalidArgument, anything
// else Internal.
func FinishError(err error) error {
	switch {
	case err == nil:
		return connect.NewError(connect.CodeInternal, errors.New("generation failed without a reason"))
	case errors.Is(err, engine.ErrKVCapacity):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, engine.ErrStopped):
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%w: %w", ErrDraining, err))
	case errors.Is(err, engine.ErrInvalidRequest):
		return InvalidArgument(err)
	}
	return connect.NewError(connect.CodeInternal, err)
}

// InvalidArgument is InvalidArgument for an invalid request. When the
// engine named the refused field (engine.FieldError) it carries a
// google.rpc.BadRequest detail with that field's path in GenerateRequest,
// so a caller can tell which parameter to blame without parsing the text.
func InvalidArgument(err error) *connect.Error {
	ce := connect.NewError(connect.CodeInvalidArgument, err)
	if field := engine.InvalidField(err); field != "" {
		d, derr := connect.NewErrorDetail(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: field, Description: err.Error()},
		}})
		if derr == nil {
			ce.AddDetail(d)
		}
	}
	return ce
}

// ContextError maps an error caused by ctx ending.
func ContextError(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	return connect.NewError(connect.CodeCanceled, err)
}

// Logprobs converts the engine's per-token logprobs (nil stays nil).
func Logprobs(lps []sample.Logprob) []*workerv1.TokenLogprob {
	if lps == nil {
		return nil
	}
	out := make([]*workerv1.TokenLogprob, len(lps))
	for i, lp := range lps {
		tl := &workerv1.TokenLogprob{Logprob: lp.Logprob}
		if len(lp.Top) > 0 {
			tl.Top = make([]*workerv1.TopLogprob, len(lp.Top))
			for j, t := range lp.Top {
				tl.Top[j] = &workerv1.TopLogprob{TokenId: t.Token, Logprob: t.Logprob}
			}
		}
		out[i] = tl
	}
	return out
}
