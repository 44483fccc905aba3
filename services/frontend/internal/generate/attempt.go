package generate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/services/frontend/internal/reqtrace"
	"switchyard.dev/services/frontend/internal/upstream"
)

// attempt routes and streams once. done reports that the generation ended
// (successfully, or with an error that must not be retried).
func (g *Generator) attempt(ctx context.Context, st *state, n int, emit func(Delta) error) (done bool, err error) {
	st.before = len(st.generated)
	id := st.req.ID
	if n > 0 {
		id = fmt.Sprintf("%s-m%d", st.req.ID, n)
	}
	gen := st.generateRequest(id)
	routed, err := g.route(ctx, st, n, &routerv1.RouteRequest{RequestId: id, Model: st.req.Model, TokenIds: gen.TokenIds,
		Hints: st.req.Hints, ExcludeInstanceIds: st.failed, ReportsPrefillDone: true, OmitCandidates: true, AffinityKey: st.req.AffinityKey})
	if err != nil {
		st.req.Trace.Event("route failed", "%v", err)
		return true, routeError{err}
	}
	traceRouted(st.req.Trace, routed)
	defer g.cfg.Router.Release(ctx, routed.Replica, id)
	w := routed.Resp.GetDecode()
	if w.GetAddress() == "" {
		return true, routeError{connect.NewError(connect.CodeUnavailable, errors.New("router chose no decode worker"))}
	}
	st.worker = w.GetInstanceId()
	st.served = Served{RouterVersion: routed.Version, WorkerVersion: w.GetVersion()}
	defer func() {
		if !done && err != nil { // a migration follows: steer it away from this worker
			st.failed = append(st.failed, w.GetInstanceId())
		}
	}()
	// The decode worker decides whether to use the router's prefill worker
	// (its uncached prompt length against -disagg-threshold-tokens).
	gen.PrefillWorker = routed.Resp.GetPrefill().GetAddress()
	// Likewise whether to copy the prompt's prefix from the worker the
	// router found holding more of it (prefix pull).
	gen.PrefixWorker = routed.Resp.GetPrefixSource().GetAddress()
	gen.PrefixBlocks = routed.Resp.GetPrefixSourceBlocks()
	// The worker serves requests first come, first served by the router's
	// decision, not by which reaches it first (a router before 0.6 sends
	// none: then this frontend's clock).
	if st.arrival == 0 {
		st.arrival = routed.Resp.GetDecidedUnixNanos()
		if st.arrival == 0 {
			st.arrival = time.Now().UnixNano()
		}
	}
	gen.ArrivalUnixNanos = st.arrival
	// Cancelling sctx cancels the worker's stream: on client disconnect, on
	// a stop string found here, and on return.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := g.cfg.Dialer.Worker(w.GetAddress()).Generate(sctx, connect.NewRequest(gen))
	if err != nil {
		return false, fmt.Errorf("worker %s: %w", w.GetInstanceId(), err)
	}
	defer stream.Close()
	reported := false
	for stream.Receive() {
		if !reported {
			// The first message carries the first token: the prefill is
			// done.
			reported = true
			g.cfg.Router.PrefillDone(ctx, routed.Replica, id)
			st.req.Trace.Event("first token", "from %s", w.GetInstanceId())
		}
		done, err := st.consume(stream.Msg(), emit)
		if done {
			return true, err
		}
		if err != nil {
			return false, fmt.Errorf("worker %s: %w", w.GetInstanceId(), err)
		}
	}
	if err := stream.Err(); err != nil {
		st.req.Trace.Event("worker failed", "%s: %v", w.GetInstanceId(), err)
		return false, fmt.Errorf("worker %s: %w", w.GetInstanceId(), err)
	}
	return false, fmt.Errorf("worker %s: %w", w.GetInstanceId(), ErrIncomplete)
}

// traceRouted records a routing decision in a sampled request's
// timeline: who decided, what it chose, and why.
func traceRouted(rec *reqtrace.Recorder, r upstream.Routed) {
	if rec == nil {
		return
	}
	res := r.Resp
	name := func(w *routerv1.Worker) string {
		s := w.GetInstanceId() + " " + w.GetVersion()
		if w.GetCanary() {
			s += " (canary)"
		}
		return s
	}
	detail := fmt.Sprintf("router %s %s, mode %s, %d prompt blocks: decode %s", r.Replica, r.Version, res.GetMode(), res.GetRequestBlocks(), name(res.GetDecode()))
	if p := res.GetPrefill(); p != nil {
		detail += ", prefill " + name(p)
	}
	if p := res.GetPrefixSource(); p != nil {
		detail += fmt.Sprintf(", prefix of %d blocks from %s", res.GetPrefixSourceBlocks(), p.GetInstanceId())
	}
	rec.Event("routed", "%s", detail)
}

// route asks the router for a worker: on the first attempt of a request
// with a PreferWorker, for that one, and if the router refuses it, as it
// would without.
func (g *Generator) route(ctx context.Context, st *state, n int, rr *routerv1.RouteRequest) (upstream.Routed, error) {
	if prefer := st.req.PreferWorker; n == 0 && prefer != "" && rr.GetHints().GetWorkerId() == "" {
		pinned := proto.CloneOf(rr)
		if pinned.Hints == nil {
			pinned.Hints = &commonv1.Hints{}
		}
		pinned.Hints.WorkerId = prefer
		routed, err := g.cfg.Router.Route(ctx, pinned)
		if err == nil || ctx.Err() != nil {
			return routed, err
		}
		g.cfg.Logger.DebugContext(ctx, "preferred worker refused", "generation_id", rr.GetRequestId(), "worker", prefer, "err", err)
	}
	return g.cfg.Router.Route(ctx, rr)
}

// consume handles one worker message.
func (st *state) consume(msg *workerv1.GenerateResponse, emit func(Delta) error) (done bool, err error) {
	var b strings.Builder
	stopped := false
	ids := msg.GetTokenIds()
	wantLogprobs := st.req.Sampling.GetLogprobs()
	if wantLogprobs && len(msg.GetLogprobs()) != len(ids) {
		return true, fmt.Errorf("%w: %d logprob entries for %d tokens", ErrWorkerContract, len(msg.GetLogprobs()), len(ids))
	}
	var lps []Logprob
	if wantLogprobs {
		lps = make([]Logprob, 0, len(ids))
	}
	for i, id := range ids {
		prev := st.text.Prev()
		piece := st.req.Tokenizer.Piece(prev, id) // one decode for the text and the logprob entry
		if wantLogprobs {
			lps = append(lps, st.logprob(prev, id, piece, msg.GetLogprobs()[i]))
		}
		text, stop := st.text.PushPiece(id, piece)
		st.generated = append(st.generated, id)
		b.WriteString(text)
		if stop {
			stopped, ids = true, ids[:i+1]
			break
		}
	}
	st.noteUsage(msg.GetUsage())
	finish := msg.GetFinishReason()
	cancelled := false
	switch {
	case stopped:
		st.finish, st.completion = "stop", len(st.generated)
	case finish == workerv1.FinishReason_FINISH_REASON_STOP:
		st.finish = "stop"
	case finish == workerv1.FinishReason_FINISH_REASON_LENGTH || len(st.generated) >= st.req.MaxTokens:
		st.finish = "length"
	case finish == workerv1.FinishReason_FINISH_REASON_CANCELLED:
		// Cancelled by the worker, not by us: treat like a broken stream,
		// once this message's tokens (they count as generated, so the
		// next worker continues after them) have reached the client.
		cancelled = true
	}
	if st.finish != "" && !stopped {
		b.WriteString(st.text.Flush())
	}
	if len(ids) > 0 || b.Len() > 0 {
		if err := emit(Delta{Text: b.String(), TokenIDs: ids, Logprobs: lps, Worker: st.worker, Served: st.served}); err != nil {
			return true, emitError{err}
		}
	}
	if cancelled {
		return false, connect.NewError(connect.CodeCanceled, errors.New("worker cancelled the generation"))
	}
	return st.finish != "", nil
}

// logprob converts the worker's entry for token id, the next output token
// after prev, which decodes to piece.
func (st *state) logprob(prev, id uint32, piece []byte, lp *workerv1.TokenLogprob) Logprob {
	tok := st.req.Tokenizer
	out := Logprob{Token: TokenLogprob{ID: id, Bytes: piece, Logprob: lp.GetLogprob()}}
	if top := lp.GetTop(); len(top) > 0 {
		out.Top = make([]TokenLogprob, len(top))
		for i, t := range top {
			b := out.Token.Bytes // the sampled token is usually among them
			if t.GetTokenId() != id {
				b = tok.Piece(prev, t.GetTokenId())
			}
			out.Top[i] = TokenLogprob{ID: t.GetTokenId(), Bytes: b, Logprob: t.GetLogprob()}
		}
	}
	return out
}
