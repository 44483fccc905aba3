// Package runner drives a workload against a sender: closed loop (a fixed
// number of concurrent sessions) or open loop (sessions arrive at the
// source's offsets, Poisson or trace timestamps), within request-count and
// duration bounds, and collects one record per request.
//
// Stopping is layered so partial results are never lost: when the bound is
// reached no new request starts; in-flight requests get a grace period after
// a duration bound and are cut (recorded as canceled) when the caller's
// context ends, e.g. on Ctrl-C. Run always returns what was measured.
package runner

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"switchyard.dev/loadtest/internal/metrics"
	"switchyard.dev/loadtest/internal/openai"
	"switchyard.dev/loadtest/internal/workload"
)

// Sender performs one measured request (openai.Client in production).
type Sender interface {
	Stream(ctx context.Context, req openai.Request, rec *metrics.Record) string
}

// Preparer is a Sender that can encode a request ahead of its send.
type Preparer interface {
	Prepare(req *openai.Request) error
}

// Config bounds a run.
type Config struct {
	// Concurrency is the number of sessions in flight in closed-loop mode,
	// and the cap on in-flight sessions in open-loop mode (0: no cap).
	Concurrency int
	// MaxRequests stops issuing after this many requests (0: no bound).
	MaxRequests int
	// Duration stops issuing after this long (0: no bound).
	Duration time.Duration
	// Grace is how long in-flight requests may finish after Duration.
	Grace time.Duration
}

// Result is what a run measured.
type Result struct {
	Records []metrics.Record
	// Elapsed runs from the start to the end of the last request.
	Elapsed time.Duration
	// Interrupted is set when the caller's context ended the run.
	Interrupted bool
}

// Stats is a live view of a run, for progress display.
type Stats struct {
	Issued, Done, Failed, OutputTokens int64
	Elapsed                            time.Duration
}

// Runner runs one workload. Create one per run.
type Runner struct {
	cfg    Config
	sender Sender

	start    time.Time    // set by Run before anything else reads it
	started  atomic.Int64 // start for Stats, which another goroutine may call earlier
	issued   atomic.Int64
	done     atomic.Int64
	failed   atomic.Int64
	outToks  atomic.Int64
	stop     chan struct{}
	stopOnce sync.Once

	mu   sync.Mutex
	recs []metrics.Record
}

// New returns a Runner.
func New(cfg Config, s Sender) *Runner {
	return &Runner{cfg: cfg, sender: s, stop: make(chan struct{})}
}

// errDurationGrace is the cancellation cause of requests cut after the
// duration bound's grace period.
var errDurationGrace = errors.New("still running when the duration grace period ended")

// Run sends src's sessions until it is exhausted, a bound is reached or ctx
// ends, and returns every record.
func (r *Runner) Run(ctx context.Context, src workload.Source) Result {
	r.start = time.Now()
	r.started.Store(r.start.UnixNano())
	reqCtx, cancelReqs := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelReqs(nil)
	go func() {
		// Interrupts cut in-flight requests at once; the duration bound
		// only stops new ones and leaves a grace period.
		var grace <-chan time.Time
		var durT <-chan time.Time
		if r.cfg.Duration > 0 {
			t := time.NewTimer(r.cfg.Duration)
			defer t.Stop()
			durT = t.C
		}
		for {
			select {
			case <-ctx.Done():
				r.halt()
				cancelReqs(context.Cause(ctx))
				return
			case <-durT:
				r.halt()
				g := time.NewTimer(r.cfg.Grace)
				defer g.Stop()
				grace, durT = g.C, nil
			case <-grace:
				cancelReqs(errDurationGrace)
				return
			case <-reqCtx.Done():
				return
			}
		}
	}()
	if src.Timed() {
		r.openLoop(reqCtx, src)
	} else {
		r.closedLoop(reqCtx, src)
	}
	elapsed := time.Since(r.start)
	cancelReqs(nil)
	r.mu.Lock()
	defer r.mu.Unlock()
	return Result{Records: r.recs, Elapsed: elapsed, Interrupted: ctx.Err() != nil}
}

// elapsed is the time since Run started (0 before).
func (r *Runner) elapsed() time.Duration {
	if ns := r.started.Load(); ns != 0 {
		return time.Since(time.Unix(0, ns))
	}
	return 0
}

// Stats returns live counters.
func (r *Runner) Stats() Stats {
	return Stats{
		Issued: r.issued.Load(), Done: r.done.Load(), Failed: r.failed.Load(),
		OutputTokens: r.outToks.Load(), Elapsed: r.elapsed(),
	}
}

func (r *Runner) halt() { r.stopOnce.Do(func() { close(r.stop) }) }

func (r *Runner) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

func (r *Runner) closedLoop(ctx context.Context, src workload.Source) {
	var mu sync.Mutex
	next := func() (workload.Session, bool) {
		mu.Lock()
		defer mu.Unlock()
		if r.stopped() {
			return nil, false
		}
		return src.Next()
	}
	var wg sync.WaitGroup
	for range max(1, r.cfg.Concurrency) {
		wg.Go(func() {
			for {
				s, ok := next()
				if !ok {
					return
				}
				r.session(ctx, s, time.Since(r.start), nil)
			}
		})
	}
	wg.Wait()
}

func (r *Runner) openLoop(ctx context.Context, src workload.Source) {
	var sem chan struct{}
	if r.cfg.Concurrency > 0 {
		sem = make(chan struct{}, r.cfg.Concurrency)
	}
	// A builder goroutine takes sessions from src and builds each first
	// turn (its prompt synthesized, its body encoded) ahead of its time,
	// up to lookahead sessions in advance; the dispatcher only waits and
	// sends. Built at send time, a 100k-token prompt took milliseconds
	// (serially in a burst), and the send was late by that, counted nowhere.
	type ready struct {
		s     workload.Session
		first workload.Turn
	}
	const lookahead = 64
	queue := make(chan ready, lookahead)
	go func() {
		defer close(queue)
		for !r.stopped() {
			s, ok := src.Next()
			if !ok {
				return
			}
			first, ok := s.Next("")
			if !ok {
				continue
			}
			r.prepare(&first.Request)
			select {
			case queue <- ready{s, first}:
			case <-r.stop:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	for it := range queue {
		s, first := it.s, it.first
		if !r.sleepUntil(s.At()) {
			return
		}
		if sem != nil {
			select {
			case sem <- struct{}{}:
			case <-r.stop:
				return
			}
		}
		wg.Go(func() {
			r.session(ctx, s, s.At(), &first)
			if sem != nil {
				<-sem
			}
		})
	}
}

// sleepUntil waits for the offset at from the start; false if stopped first.
func (r *Runner) sleepUntil(at time.Duration) bool {
	d := at - time.Since(r.start)
	if d <= 0 {
		return !r.stopped()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.stop:
		return false
	}
}

// take reserves one request of the MaxRequests budget and returns its id.
func (r *Runner) take() (int, bool) {
	if r.stopped() {
		return 0, false
	}
	n := r.issued.Add(1)
	if r.cfg.MaxRequests > 0 && n > int64(r.cfg.MaxRequests) {
		r.issued.Add(-1)
		r.halt()
		return 0, false
	}
	if r.cfg.MaxRequests > 0 && n == int64(r.cfg.MaxRequests) {
		r.halt()
	}
	return int(n - 1), true
}

// prepare encodes req ahead of its send when the sender can.
func (r *Runner) prepare(req *openai.Request) {
	if p, ok := r.sender.(Preparer); ok {
		_ = p.Prepare(req) // on error Stream encodes again and reports it
	}
}

// session runs s's turns; first, when set, is its first turn, already
// taken from s and prepared.
func (r *Runner) session(ctx context.Context, s workload.Session, due time.Duration, first *workload.Turn) {
	var reply string
	for turn := 0; ; turn++ {
		var t workload.Turn
		if turn == 0 && first != nil {
			t = *first
		} else {
			var ok bool
			if t, ok = s.Next(reply); !ok {
				return
			}
		}
		if t.Delay > 0 {
			due = time.Since(r.start) + t.Delay
			if !r.sleepUntil(due) {
				return
			}
		}
		id, ok := r.take()
		if !ok {
			return
		}
		rec := metrics.Record{
			ID: id, Session: s.ID(), Turn: turn, Scheduled: due, Start: time.Since(r.start),
			InputTokens: t.InputTokens, MaxTokens: t.Request.MaxTokens,
		}
		reply = r.sender.Stream(ctx, t.Request, &rec)
		r.finish(rec)
		if !rec.OK() {
			return
		}
		due = time.Since(r.start)
	}
}

func (r *Runner) finish(rec metrics.Record) {
	r.done.Add(1)
	if rec.Failed() {
		r.failed.Add(1)
	}
	r.outToks.Add(int64(rec.OutputTokens))
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
}
