// Package generate runs one generation across the mesh: route, stream from
// the chosen worker, release, and migrate to another worker when the
// stream breaks.
//
// Migration keeps the client's view whole. When a worker stream fails
// mid-way (Unavailable, a reset connection, or EOF before a final
// message), the request is routed again with the tokens generated so far
// appended to the prompt and max_tokens reduced by as many; text is
// decoded here from token ids (libs/engine/tokenizer's TextStream), so bytes the dead worker
// held back are not lost, and usage counts the original prompt and every
// generated token.
package generate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/mesh/backoff"
	"switchyard.dev/services/frontend/internal/reqtrace"
	"switchyard.dev/services/frontend/internal/upstream"
)

// Router is the routing the generator needs (upstream.Routers).
type Router interface {
	Route(ctx context.Context, req *routerv1.RouteRequest) (upstream.Routed, error)
	// PrefillDone reports the first token of a request routed with
	// reports_prefill_done; Release reports its end. Both return at once
	// (the reports go in the background); ctx is the request's, for its
	// request id and trace, not a deadline.
	PrefillDone(ctx context.Context, replica, id string)
	Release(ctx context.Context, replica, id string)
}

// Dialer returns a worker client (upstream.Workers).
type Dialer interface {
	Worker(baseURL string) workerv1connect.WorkerServiceClient
}

// Request is one generation on a tokenized prompt.
type Request struct {
	ID        string
	Model     string
	Prompt    []uint32
	Tokenizer tokenizer.Tokenizer
	// MaxTokens is the completion budget, already fitted to the context.
	MaxTokens int
	Sampling  *commonv1.SamplingParams
	Stop      []string
	StopIDs   []uint32
	IgnoreEOS bool
	Hints     *commonv1.Hints
	// PreferWorker, when set and Hints names no worker, asks the router
	// for this worker instance on the first attempt (as hints.worker_id
	// does): the choices of one request go where the first one is, so they
	// share its prompt's KV blocks. Unlike hints.worker_id it is only a
	// preference: if the router refuses it, and on every migration, the
	// router chooses freely.
	PreferWorker string
	// AffinityKey keys the request's canary group (package canary): the
	// frontend derives it from the session or the conversation, so a
	// conversation's turns land in one group; 0 lets the router key the
	// request by its prompt.
	AffinityKey uint64
	// Trace records the request's timeline when it is sampled for the
	// console (nil: not sampled).
	Trace *reqtrace.Recorder
}

// Served names the versions that served a generation's attempt: the
// frontend's latency and error metrics carry them, so a canary's numbers
// can be told from its baseline's.
type Served struct {
	RouterVersion string
	WorkerVersion string
}

// Delta is new output: the tokens TokenIDs arrived and Text can be shown
// (it may be empty while bytes are held back). With Sampling.Logprobs,
// Logprobs has one entry per TokenIDs entry. A stop string ends the output
// with the token that completed it: later tokens of that worker message,
// and their entries, are dropped.
type Delta struct {
	Text     string
	TokenIDs []uint32
	Logprobs []Logprob
	// Worker is the instance id of the worker that generated the tokens.
	Worker string
	Served Served
}

// Logprob is the log probability of one output token, from the worker
// (workerv1.TokenLogprob), with the token's bytes.
type Logprob struct {
	Token TokenLogprob
	// Top are the Sampling.TopLogprobs most likely tokens at this
	// position, most likely first, each decoded after the same token as
	// Token.
	Top []TokenLogprob
}

// TokenLogprob is a token at one position and its log probability.
type TokenLogprob struct {
	ID uint32
	// Bytes are what the token adds to the text at its position: its
	// piece decoded after the token before it, as the text is (llama2.c
	// drops a piece's leading space right after BOS, and control tokens
	// decode to nothing).
	Bytes   []byte
	Logprob float32
}

// Result summarizes a generation that ended.
type Result struct {
	Finish           string // "stop" or "length"
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int
	Migrations       int
	// Served is what served the last attempt (empty when none was
	// routed).
	Served Served
}

// Config configures a Generator.
type Config struct {
	Router Router
	Dialer Dialer
	Logger *slog.Logger
	// MigrationAttempts is how many times a broken stream is re-routed.
	MigrationAttempts int
	// OnMigrate, if set, is called before each migration.
	OnMigrate func(model string)
}

// Generator runs generations; it is safe for concurrent use.
type Generator struct{ cfg Config }

// New returns a Generator.
func New(cfg Config) *Generator {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Generator{cfg: cfg}
}

// ErrIncomplete marks a worker stream that ended without a final message.
var ErrIncomplete = errors.New("generate: worker stream ended without a finish reason")

// ErrWorkerContract marks a worker reply that breaks the worker API, such
// as logprobs that do not match its tokens. It is not retried.
var ErrWorkerContract = errors.New("generate: worker broke the protocol")

// emitError marks a failure to deliver output to the client.
type emitError struct{ err error }

func (e emitError) Error() string { return "generate: client: " + e.err.Error() }
func (e emitError) Unwrap() error { return e.err }

// Run generates, calling emit for each delta in order, and returns how it
// ended. An error before the first delta leaves nothing emitted, so the
// caller can still answer with an error status.
func (g *Generator) Run(ctx context.Context, req Request, emit func(Delta) error) (Result, error) {
	st := &state{req: req, text: tokenizer.NewTextStream(req.Tokenizer, req.Prompt[len(req.Prompt)-1], req.Stop)}
	var last error
	for attempt := 0; attempt <= g.cfg.MigrationAttempts; attempt++ {
		if attempt > 0 {
			st.migrations++
			if g.cfg.OnMigrate != nil {
				g.cfg.OnMigrate(req.Model)
			}
			req.Trace.Event("migrate", "attempt %d after %d tokens, away from %v: %v", attempt, len(st.generated), st.failed, last)
			wait := migrationBackoff.Delay(attempt, nil)
			g.cfg.Logger.InfoContext(ctx, "migrating request", "generation_id", req.ID, "attempt", attempt,
				"generated", len(st.generated), "in", wait, "err", last)
			if !backoff.Sleep(ctx, wait) {
				return st.result(), ctx.Err()
			}
		}
		done, err := g.attempt(ctx, st, attempt, emit)
		if done {
			return st.result(), err
		}
		if !Migratable(ctx, err) {
			return st.result(), err
		}
		last = err
	}
	return st.result(), fmt.Errorf("generate: gave up after %d migrations: %w", g.cfg.MigrationAttempts, last)
}

// Migratable reports whether err, from a worker stream, is worth another
// worker: the worker went away or failed, and the client is still there.
func Migratable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || err == nil {
		return false
	}
	var ee emitError
	var re routeError
	if errors.As(err, &ee) || errors.As(err, &re) {
		return false
	}
	if errors.Is(err, ErrIncomplete) {
		return true
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeInternal, connect.CodeAborted,
		connect.CodeCanceled, connect.CodeResourceExhausted:
		return true
	}
	return false
}

// migrationBackoff spaces a request's migrations. The first waits at most
// 25ms; full jitter (package backoff) spreads the streams that a dying
// worker broke all at once over that window, so they do not reach the
// router and the surviving workers in one burst.
var migrationBackoff = backoff.Policy{Base: 25 * time.Millisecond, Max: 200 * time.Millisecond}

// routeError wraps a failure of the router itself: it already failed over
// between replicas, so it is not retried here.
type routeError struct{ err error }

func (e routeError) Error() string { return e.err.Error() }
func (e routeError) Unwrap() error { return e.err }

// state is what survives across attempts.
type state struct {
	req        Request
	text       *tokenizer.TextStream
	generated  []uint32
	before     int // tokens generated before the current attempt
	finish     string
	completion int
	cached     int
	haveCached bool
	migrations int
	failed     []string // workers whose stream broke, excluded when re-routing
	worker     string   // the current attempt's worker instance
	served     Served   // the current attempt's versions
	// arrival is the request's first routing decision (Unix ns), which
	// every attempt passes on: a migrated request keeps its place.
	arrival int64
}

func (s *state) result() Result {
	return Result{Finish: s.finish, PromptTokens: len(s.req.Prompt), CompletionTokens: max(s.completion, len(s.generated)),
		CachedTokens: min(s.cached, len(s.req.Prompt)), Migrations: s.migrations, Served: s.served}
}

func (s *state) noteUsage(u *workerv1.Usage) {
	if u == nil {
		return
	}
	if !s.haveCached || s.migrations == 0 {
		s.cached, s.haveCached = int(u.GetCachedTokens()), true
	}
	s.completion = s.before + int(u.GetCompletionTokens())
}

func (s *state) generateRequest(id string) *workerv1.GenerateRequest {
	return &workerv1.GenerateRequest{
		RequestId: id,
		Model:     s.req.Model,
		TokenIds:  slices.Concat(s.req.Prompt, s.generated),
		Sampling:  s.req.Sampling,
		Stop: &commonv1.StopConditions{
			MaxTokens: uint32(s.req.MaxTokens - len(s.generated)), Stop: s.req.Stop,
			StopTokenIds: s.req.StopIDs, IgnoreEos: s.req.IgnoreEOS,
		},
		Hints: s.req.Hints,
	}
}
