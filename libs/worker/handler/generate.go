package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"connectrpc.com/connect"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/worker/engines"
	"switchyard.dev/libs/worker/wire"
)

// Generate implements WorkerServiceHandler. The engine request lives as
// long as the RPC: a client that cancels or disconnects cancels it, and
// the engine frees its KV blocks before its next step.
func (h *Handler) Generate(ctx context.Context, req *connect.Request[workerv1.GenerateRequest], out *connect.ServerStream[workerv1.GenerateResponse]) error {
	if err := h.checkModel(req.Msg.GetModel()); err != nil {
		return err
	}
	if !h.begin() {
		return connect.NewError(connect.CodeUnavailable, wire.ErrDraining)
	}
	defer h.end()
	if err := wire.Unhonoured(req.Msg.GetSampling()); err != nil {
		return err
	}
	r := EngineRequest(req.Msg)
	submitted, first := func() {}, func(*engine.Output) {}
	if h.dis != nil {
		// Refused before a remote prefill is spent on it (the prefill
		// worker sees neither the stop conditions nor this context);
		// without one, Submit validates.
		if req.Msg.GetPrefillWorker() != "" || req.Msg.GetPrefixWorker() != "" {
			if err := h.eng.Validate(r); err != nil {
				return wire.SubmitError(ctx, err)
			}
		}
		submitted, first = h.dis.Prepare(ctx, &r, req.Msg.GetPrefillWorker(), req.Msg.GetPrefixWorker(), int(req.Msg.GetPrefixBlocks()))
	}
	st, err := h.eng.Generate(ctx, r)
	if err != nil {
		first(nil)
		return wire.SubmitError(ctx, err)
	}
	submitted()
	return h.relay(ctx, st, len(r.Prompt), first, out)
}

// RemotePrefill implements WorkerServiceHandler.
func (h *Handler) RemotePrefill(ctx context.Context, req *connect.Request[workerv1.RemotePrefillRequest]) (*connect.Response[workerv1.RemotePrefillResponse], error) {
	if err := h.beginExport(req.Msg.GetModel()); err != nil {
		return nil, err
	}
	defer h.end()
	res, err := h.exp.Prefill(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(res), nil
}

// ExportPrefix implements WorkerServiceHandler.
func (h *Handler) ExportPrefix(ctx context.Context, req *connect.Request[workerv1.ExportPrefixRequest]) (*connect.Response[workerv1.ExportPrefixResponse], error) {
	if err := h.beginExport(req.Msg.GetModel()); err != nil {
		return nil, err
	}
	defer h.end()
	res, err := h.exp.ExportPrefix(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(res), nil
}

// beginExport admits an export of KV for model (RemotePrefill,
// ExportPrefix): Unimplemented without a transfer agent, the model's
// errors, Unavailable while draining. On nil the caller calls h.end.
func (h *Handler) beginExport(model string) error {
	if h.exp == nil {
		return connect.NewError(connect.CodeUnimplemented, errors.New("this worker does not export KV (no transfer agent)"))
	}
	if err := h.checkModel(model); err != nil {
		return err
	}
	if !h.begin() {
		return connect.NewError(connect.CodeUnavailable, wire.ErrDraining)
	}
	return nil
}

func (h *Handler) checkModel(model string) error {
	switch model {
	case h.model:
		return nil
	case "":
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("model is required (this worker serves %q)", h.model))
	}
	return connect.NewError(connect.CodeNotFound, fmt.Errorf("model %q is not served by this worker (it serves %q)", model, h.model))
}

// relay streams st's outputs to out until the final one.
// first is called with the first output, or nil if there is none.
func (h *Handler) relay(ctx context.Context, st engines.Stream, promptLen int, first func(*engine.Output), out *connect.ServerStream[workerv1.GenerateResponse]) error {
	pending := int64(promptLen)
	h.pendingPrefill.Add(pending)
	defer func() { h.pendingPrefill.Add(-pending) }()
	gotFirst := false
	defer func() {
		if !gotFirst {
			first(nil)
		}
	}()
	for {
		o, err := st.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return wire.ContextError(ctx, err)
		}
		if !gotFirst {
			gotFirst = true
			first(&o)
		}
		h.pendingPrefill.Add(-pending)
		pending = 0
		res, err := response(ctx, h.coalesce(st, o))
		if err != nil {
			return err
		}
		if res == nil {
			continue
		}
		if err := out.Send(res); err != nil {
			st.Cancel()
			return err
		}
		if o.Finish != "" {
			return nil
		}
	}
}

// maxCoalesce bounds the outputs merged into one message.
const maxCoalesce = 256

// coalesce merges outputs already queued on st into o, so a client (or
// network) slower than the engine gets fewer, larger messages and never a
// later one. It relies on Recv returning queued outputs before looking at
// its (here already cancelled) context.
func (h *Handler) coalesce(st engines.Stream, o engine.Output) engine.Output {
	for i := 0; o.Finish == "" && i < maxCoalesce; i++ {
		next, err := st.Recv(h.noWait)
		if err != nil {
			break
		}
		o.TokenIDs = append(slices.Clip(o.TokenIDs), next.TokenIDs...)
		o.Logprobs = append(slices.Clip(o.Logprobs), next.Logprobs...)
		o.Text += next.Text
		o.Finish, o.Err, o.Usage = next.Finish, next.Err, next.Usage
	}
	return o
}

// EngineRequest converts a GenerateRequest; the engine validates the result.
func EngineRequest(m *workerv1.GenerateRequest) engine.Request {
	stop := m.GetStop()
	p := wire.Sampling(m.GetSampling())
	return engine.Request{
		ID:       m.GetRequestId(),
		Prompt:   m.GetTokenIds(),
		Sampling: p,
		Stop: engine.StopParams{
			MaxTokens:    int(stop.GetMaxTokens()),
			StopStrings:  stop.GetStop(),
			StopTokenIDs: stop.GetStopTokenIds(),
			IgnoreEOS:    stop.GetIgnoreEos(),
		},
		Priority: int(m.GetHints().GetPriority()),
		Arrival:  wire.Arrival(m.GetArrivalUnixNanos()),
	}
}

// response converts one engine output; nil means nothing to send.
func response(ctx context.Context, o engine.Output) (*workerv1.GenerateResponse, error) {
	res := &workerv1.GenerateResponse{TokenIds: o.TokenIDs, Text: o.Text, Logprobs: wire.Logprobs(o.Logprobs)}
	switch o.Finish {
	case "":
		if len(o.TokenIDs) == 0 && o.Text == "" {
			return nil, nil
		}
		return res, nil
	case engine.FinishStop:
		res.FinishReason = workerv1.FinishReason_FINISH_REASON_STOP
	case engine.FinishLength:
		res.FinishReason = workerv1.FinishReason_FINISH_REASON_LENGTH
	case engine.FinishCancelled:
		if ctx.Err() != nil {
			return nil, wire.ContextError(ctx, ctx.Err())
		}
		res.FinishReason = workerv1.FinishReason_FINISH_REASON_CANCELLED
	default:
		return nil, wire.FinishError(o.Err)
	}
	res.Usage = &workerv1.Usage{
		PromptTokens:     u32(o.Usage.PromptTokens),
		CompletionTokens: u32(o.Usage.CompletionTokens),
		CachedTokens:     u32(o.Usage.CachedPromptTokens),
	}
	return res, nil
}
