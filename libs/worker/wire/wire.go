// Package wire converts between the worker's RPC messages and the engine's
// types and maps engine errors to Connect codes. Both the Generate handler
// and the disaggregated prefill path put engine work behind an RPC; one
// mapping keeps their sampling and their error codes the same.
package wire

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/sample"
	"switchyard.dev/libs/worker/engines"
)

// ErrDraining is returned (as Unavailable) by a worker that is shutting
// down: the caller should retry elsewhere.
var ErrDraining = errors.New("worker is shutting down; retry on another worker")

// Sampling converts sampling parameters (nil means greedy defaults). The
// bias map is copied, so the result does not alias the message. A
// constraint without a kind, or with an empty json_schema, reads as free
// text: Unhonoured refuses those first.
func Sampling(s *commonv1.SamplingParams) sample.Params {
	p := sample.Params{Temperature: s.GetTemperature(), TopP: s.GetTopP(), TopK: int(s.GetTopK()),
		Logprobs: s.GetLogprobs(), TopLogprobs: int(min(s.GetTopLogprobs(), math.MaxInt32)),
		PresencePenalty: s.GetPresencePenalty(), FrequencyPenalty: s.GetFrequencyPenalty(),
		Format: format(s.GetConstraint())}
	if s != nil && s.Seed != nil {
		seed := *s.Seed
		p.Seed = &seed
	}
	if b := s.GetLogitBias(); len(b) > 0 {
		p.LogitBias = maps.Clone(b)
	}
	return p
}

// Unhonoured refuses, as InvalidArgument naming the field, sampling
// parameters the wire carries but Sampling cannot hand to the engine: an
// output constraint with no kind, or with an empty json_schema (no
// schema), which would otherwise read as free text. A request that asked
// for a constraint must not come back as if it had not. (The engine
// validates everything else: ranges, vocabulary, an executor with
// logits, the formats it supports.)
func Unhonoured(s *commonv1.SamplingParams) error {
	c := s.GetConstraint()
	if c == nil {
		return nil
	}
	why := ""
	switch k := c.GetKind().(type) {
	case nil:
		why = "names no kind"
	case *commonv1.OutputConstraint_JsonSchema:
		if k.JsonSchema == "" {
			why = "has an empty json_schema"
		}
	}
	if why == "" {
		return nil
	}
	return InvalidArgument(&engine.FieldError{Field: "sampling.constraint",
		Err: fmt.Errorf("%w: sampling.constraint %s", engine.ErrInvalidSampling, why)})
}

func format(c *commonv1.OutputConstraint) sample.Format {
	switch k := c.GetKind().(type) {
	case *commonv1.OutputConstraint_JsonObject:
		return sample.Format{JSONObject: true}
	case *commonv1.OutputConstraint_JsonSchema:
		return sample.Format{JSONSchema: k.JsonSchema}
	}
	return sample.Format{}
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
		Logprobs: p.Logprobs, TopLogprobs: uint32(max(p.TopLogprobs, 0)),
		PresencePenalty: p.PresencePenalty, FrequencyPenalty: p.FrequencyPenalty}
	if p.Seed != nil {
		seed := *p.Seed
		out.Seed = &seed
	}
	if len(p.LogitBias) > 0 {
		out.LogitBias = maps.Clone(p.LogitBias)
	}
	// Both set is invalid (sample.Params.Validate); the schema wins here
	// only so that the conversion is total.
	switch {
	case p.Format.JSONSchema != "":
		out.Constraint = &commonv1.OutputConstraint{Kind: &commonv1.OutputConstraint_JsonSchema{JsonSchema: p.Format.JSONSchema}}
	case p.Format.JSONObject:
		out.Constraint = &commonv1.OutputConstraint{Kind: &commonv1.OutputConstraint_JsonObject{JsonObject: &commonv1.JsonObject{}}}
	}
	return out
}

// SubmitError maps an error from engine.Submit (or an adapter's
// Generate): invalid requests are InvalidArgument, a stopping engine
// Unavailable (ErrDraining), an engine that stopped answering
// (engines.ErrUnavailable) Unavailable, a caller
// gone Canceled or DeadlineExceeded, anything else Internal.
func SubmitError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, engine.ErrInvalidRequest):
		return InvalidArgument(err)
	case errors.Is(err, engine.ErrStopped):
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("%w: %w", ErrDraining, err))
	case errors.Is(err, engines.ErrUnavailable):
		return connect.NewError(connect.CodeUnavailable, err)
	case ctx.Err() != nil:
		return ContextError(ctx, err)
	}
	return connect.NewError(connect.CodeInternal, fmt.Errorf("submit: %w", err))
}

// FinishError maps the error of an engine output that finished with
// engine.FinishError: no KV room ever ResourceExhausted, a stopping engine
// Unavailable (ErrDraining), an invalid request InvalidArgument, an engine
// that stopped answering Unavailable, anything else Internal.
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
	case errors.Is(err, engines.ErrUnavailable):
		return connect.NewError(connect.CodeUnavailable, err)
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
