package upstreamtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/mesh/reqid"
)

// WorkerConfig shapes a fake worker's behaviour.
type WorkerConfig struct {
	ID      string
	Model   string // default "tiny"
	Context int    // context length, default 512
	// TokenDelay paces tokens; 0 emits them as fast as possible.
	TokenDelay time.Duration
	// DieAfter > 0 ends every stream after that many tokens without a
	// final message: with Abort set as an Unavailable error, otherwise as a
	// clean EOF.
	DieAfter int
	Abort    bool
	// CancelAfter > 0 ends every stream with a message marked
	// FINISH_REASON_CANCELLED that carries token number CancelAfter (and,
	// with Batch, the tokens coalesced before it), as a worker whose
	// engine cancelled the request may send.
	CancelAfter int
	// EOSAfter > 0 ends with an end-of-sequence token after that many
	// tokens (counted in usage, not sent), unless ignore_eos is set.
	EOSAfter int
	// Cached is reported as usage.cached_tokens.
	Cached uint32
	// InfoErr, if set, fails GetModelInfo.
	InfoErr *connect.Error
	// GenerateErr, if set, fails Generate before any token.
	GenerateErr *connect.Error
	// Batch > 1 sends up to that many tokens per message (default 1).
	Batch int
	// NoLogprobs rejects sampling.logprobs with InvalidArgument, as a
	// worker of the sim executor does.
	NoLogprobs bool
	// IgnoreLogprobs sends no logprobs even when asked, as a worker built
	// before they existed would.
	IgnoreLogprobs bool
	// Reply, if set and not empty for a request, is the text the worker
	// sends instead of the script, a byte a token, then end-of-sequence
	// (as a constrained engine ends a value). It is by completion
	// position, so it does not survive a migration.
	Reply func(*workerv1.GenerateRequest) string
}

// Logprob is the fake log probability of the token at sequence position
// p (prompt tokens included), so a migrated generation gets the same
// entries as an undisturbed one.
func Logprob(p int) float32 { return -0.5 * float32(p) }

// TopLogprobs returns the n most likely tokens a fake worker reports at
// position p: the token it emits, with Logprob(p), then the byte tokens of
// '0', '1', ... (never in Script), each 1 less likely than the one before.
func TopLogprobs(p, n int) []*workerv1.TopLogprob {
	top := make([]*workerv1.TopLogprob, n)
	for j := range top {
		id := ScriptToken(p)
		if j > 0 {
			id = uint32('0'+j-1) + tokenizer.ByteOffset
		}
		top[j] = &workerv1.TopLogprob{TokenId: id, Logprob: Logprob(p) - float32(j)}
	}
	return top
}

// ScriptToken is the token fake workers emit at sequence position p.
func ScriptToken(p int) uint32 { return uint32(Script[p%len(Script)]) + tokenizer.ByteOffset }

// Worker is a running fake worker.
type Worker struct {
	workerv1connect.UnimplementedWorkerServiceHandler
	cfg WorkerConfig
	URL string

	infoCalls atomic.Int64
	cancelled atomic.Int64
	started   atomic.Int64
	mu        sync.Mutex
	reqs      []*workerv1.GenerateRequest
	reqIDs    []string // X-Request-Id of each Generate
	cancelCh  chan struct{}
	once      sync.Once
}

// StartWorker serves a fake worker until the test ends.
func StartWorker(tb testing.TB, cfg WorkerConfig) *Worker {
	tb.Helper()
	if cfg.Model == "" {
		cfg.Model = "tiny"
	}
	if cfg.Context == 0 {
		cfg.Context = 512
	}
	w := &Worker{cfg: cfg, cancelCh: make(chan struct{})}
	// Compressing only large messages, as libs/mesh/server does: gzip of
	// every one-token message would cost the fake more than the frontend.
	w.URL = serve(tb, handler(workerv1connect.NewWorkerServiceHandler(w, connect.WithCompressMinBytes(4096))))
	return w
}

// Requests returns the Generate requests received so far.
func (w *Worker) Requests() []*workerv1.GenerateRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*workerv1.GenerateRequest(nil), w.reqs...)
}

// RequestIDs returns the X-Request-Id header of each Generate call so far
// ("" where it had none).
func (w *Worker) RequestIDs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.reqIDs...)
}

// InfoCalls counts GetModelInfo calls.
func (w *Worker) InfoCalls() int { return int(w.infoCalls.Load()) }

// Started counts Generate streams that began.
func (w *Worker) Started() int { return int(w.started.Load()) }

// Cancelled is closed when a Generate stream first sees its context end
// before finishing.
func (w *Worker) Cancelled() <-chan struct{} { return w.cancelCh }

// GetModelInfo implements the WorkerService.
func (w *Worker) GetModelInfo(context.Context, *connect.Request[workerv1.GetModelInfoRequest]) (*connect.Response[workerv1.GetModelInfoResponse], error) {
	w.infoCalls.Add(1)
	if w.cfg.InfoErr != nil {
		return nil, w.cfg.InfoErr
	}
	return connect.NewResponse(&workerv1.GetModelInfoResponse{
		Model: w.cfg.Model, VocabSize: VocabSize, ContextLength: uint32(w.cfg.Context), BlockSize: 16,
		BosTokenId: tokenizer.BOS, EosTokenId: tokenizer.EOS, TokenizerKind: "bytes",
	}), nil
}

// Generate implements the WorkerService.
func (w *Worker) Generate(ctx context.Context, req *connect.Request[workerv1.GenerateRequest], st *connect.ServerStream[workerv1.GenerateResponse]) error {
	w.started.Add(1)
	w.mu.Lock()
	w.reqs = append(w.reqs, req.Msg)
	w.reqIDs = append(w.reqIDs, req.Header().Get(reqid.Header))
	w.mu.Unlock()
	if w.cfg.GenerateErr != nil {
		return w.cfg.GenerateErr
	}
	m := req.Msg
	if m.GetModel() != w.cfg.Model {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("wrong model"))
	}
	if w.cfg.NoLogprobs && m.GetSampling().GetLogprobs() {
		err := fmt.Errorf("request %q: logprobs need an executor that computes logits (model %q is simulated)", m.GetRequestId(), w.cfg.Model)
		return fieldError(err, "sampling.logprobs")
	}
	return w.recite(ctx, m, st)
}

// fieldError is InvalidArgument with a google.rpc.BadRequest detail naming
// field, as a real worker answers (libs/worker/wire.InvalidArgument).
func fieldError(err error, field string) *connect.Error {
	ce := connect.NewError(connect.CodeInvalidArgument, err)
	d, derr := connect.NewErrorDetail(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
		{Field: field, Description: err.Error()},
	}})
	if derr == nil {
		ce.AddDetail(d)
	}
	return ce
}

// recite sends the script from the prompt's end, Batch tokens a message.
func (w *Worker) recite(ctx context.Context, m *workerv1.GenerateRequest, st *connect.ServerStream[workerv1.GenerateResponse]) error {
	prompt := len(m.GetTokenIds())
	usage := func(n int) *workerv1.Usage {
		return &workerv1.Usage{PromptTokens: uint32(prompt), CompletionTokens: uint32(n), CachedTokens: w.cfg.Cached}
	}
	maxTokens := int(m.GetStop().GetMaxTokens())
	var reply string
	if w.cfg.Reply != nil {
		reply = w.cfg.Reply(m)
	}
	msg := &workerv1.GenerateResponse{}
	for n := 0; ; n++ {
		if reply != "" && n == len(reply) {
			msg.FinishReason, msg.Usage = workerv1.FinishReason_FINISH_REASON_STOP, usage(n+1)
			return st.Send(msg)
		}
		if w.cfg.DieAfter > 0 && n == w.cfg.DieAfter {
			if w.cfg.Abort {
				return connect.NewError(connect.CodeUnavailable, errors.New("worker died"))
			}
			return nil
		}
		if w.cfg.EOSAfter > 0 && n == w.cfg.EOSAfter && !m.GetStop().GetIgnoreEos() {
			msg.FinishReason, msg.Usage = workerv1.FinishReason_FINISH_REASON_STOP, usage(n+1)
			return st.Send(msg)
		}
		if err := w.pace(ctx); err != nil {
			return err
		}
		p := prompt + n
		tok := ScriptToken(p)
		if reply != "" {
			tok = uint32(reply[n]) + tokenizer.ByteOffset
		}
		msg.TokenIds = append(msg.TokenIds, tok)
		if s := m.GetSampling(); s.GetLogprobs() && !w.cfg.IgnoreLogprobs {
			msg.Logprobs = append(msg.Logprobs, &workerv1.TokenLogprob{Logprob: Logprob(p), Top: TopLogprobs(p, int(s.GetTopLogprobs()))})
		}
		msg.Usage = usage(n + 1)
		if n+1 >= maxTokens || p+1 >= w.cfg.Context {
			msg.FinishReason = workerv1.FinishReason_FINISH_REASON_LENGTH
		} else if n+1 == w.cfg.CancelAfter {
			msg.FinishReason = workerv1.FinishReason_FINISH_REASON_CANCELLED
		}
		if len(msg.TokenIds) < w.cfg.Batch && msg.FinishReason == workerv1.FinishReason_FINISH_REASON_UNSPECIFIED &&
			(w.cfg.DieAfter == 0 || n+1 < w.cfg.DieAfter) {
			continue
		}
		if err := st.Send(msg); err != nil {
			return err
		}
		if msg.FinishReason != workerv1.FinishReason_FINISH_REASON_UNSPECIFIED {
			return nil
		}
		msg = &workerv1.GenerateResponse{}
	}
}

func (w *Worker) pace(ctx context.Context) error {
	if w.cfg.TokenDelay <= 0 {
		if ctx.Err() != nil {
			w.noteCancel()
		}
		return ctx.Err()
	}
	t := time.NewTimer(w.cfg.TokenDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		w.noteCancel()
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (w *Worker) noteCancel() {
	w.cancelled.Add(1)
	w.once.Do(func() { close(w.cancelCh) })
}
