package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"switchyard.dev/libs/mesh/reqid"
	"switchyard.dev/services/frontend/internal/auth"
	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/openai"
)

// call identifies one response: every chunk repeats these. The endpoint
// sets id and created; serve fills in the rest from the request.
type call struct {
	id      string
	created int64
	model   string
	// logprobs: the request asked for them, so a whole response has a
	// logprobs object even without tokens.
	logprobs bool
}

// format builds an endpoint's response bodies for one choice (index 0;
// withIndex renumbers them). lps are the logprob entries of the tokens
// the body carries (none without logprobs). delta and finish may return
// nil (nothing to send yet: a tool call being read) or an []any of
// several events.
type format interface {
	start(c call) any // first chunk, or nil
	delta(c call, text string, lps []generate.Logprob) any
	finish(c call, reason string, lps []generate.Logprob) any
	usage(c call, u openai.Usage) any
	whole(c call, text, reason string, lps []generate.Logprob, u openai.Usage) any
	// fork returns a format for another choice of the same response: a
	// format may keep the state of one reply.
	fork() format
}

// serve runs a prepared generation, one per choice, and writes the
// response.
func (a *API) serve(w http.ResponseWriter, r *http.Request, endpoint string, g openai.Generation, req generate.Request, c call, f format) {
	c.model, c.logprobs = g.Model, g.Logprobs
	start := time.Now()
	ctx := r.Context()
	if a.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.cfg.RequestTimeout)
		defer cancel()
	}
	req.ID = c.id
	g.N = max(g.N, 1)
	req.Trace = a.cfg.Traces.Start(reqid.From(r.Context()), traceID(r.Context()), endpoint, req.Model)
	req.Trace.Event("accepted", "%d prompt tokens, up to %d new, n %d, stream %v", len(req.Prompt), req.MaxTokens, g.N, g.Stream)
	reqs, fs := choiceRequests(req, g), forks(f, g.N)
	tm := a.timing(endpoint, req.Model, start)
	var res generate.Result
	var err error
	if g.Stream {
		res, err = a.stream(ctx, w, r, reqs, g, c, fs, tm)
	} else {
		res, err = a.answer(ctx, w, r, reqs, g, c, fs, tm)
	}
	req.Trace.Event("ended", "%s: %d completion tokens, %d cached prompt tokens, %d migrations", res.Finish, res.CompletionTokens, res.CachedTokens, res.Migrations)
	req.Trace.End(err)
	// The key's token budget pays for what was computed, even for a
	// request that failed or whose client left.
	auth.TicketFrom(r.Context()).Charge(context.WithoutCancel(r.Context()), int64(res.PromptTokens+res.CompletionTokens))
	if m := a.cfg.Metrics; m != nil {
		m.PromptTokens.WithLabelValues(req.Model).Add(float64(res.PromptTokens))
		m.CompletionTokens.WithLabelValues(req.Model).Add(float64(res.CompletionTokens))
		m.CachedTokens.WithLabelValues(req.Model).Add(float64(res.CachedTokens))
		switch {
		case err == nil:
			m.Generations.WithLabelValues(req.Model, res.Served.RouterVersion, res.Served.WorkerVersion).Inc()
		case r.Context().Err() == nil:
			m.GenerationErrors.WithLabelValues(req.Model, res.Served.RouterVersion, res.Served.WorkerVersion).Inc()
		}
	}
	switch {
	case err != nil && r.Context().Err() != nil:
		a.cfg.Logger.DebugContext(ctx, "client went away", "completion_id", c.id, "err", err)
	default:
		a.cfg.Logger.DebugContext(ctx, "generation ended", "endpoint", endpoint, "model", req.Model, "completion_id", c.id,
			"choices", g.N, "prompt_tokens", res.PromptTokens, "completion_tokens", res.CompletionTokens,
			"migrations", res.Migrations, "duration", time.Since(start), "err", err)
	}
}

// answer writes the whole response once every choice is complete.
func (a *API) answer(ctx context.Context, w http.ResponseWriter, r *http.Request, reqs []generate.Request, g openai.Generation, c call, fs []format, tm *timing) (generate.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan choiceEvent, queuedEvents)
	a.fanOut(ctx, reqs, events)
	n := len(reqs)
	texts := make([]strings.Builder, n)
	lps := make([][]generate.Logprob, n)
	res := make([]generate.Result, n)
	var failed error
	for left := n; left > 0; {
		ev := <-events
		switch {
		case ev.end:
			left--
			res[ev.i] = ev.res
			if ev.err != nil && failed == nil {
				failed = ev.err
				cancel()
			}
		case failed == nil:
			if ev.i == 0 {
				tm.observe(ev.d)
			}
			texts[ev.i].WriteString(ev.d.Text)
			lps[ev.i] = append(lps[ev.i], ev.d.Logprobs...)
		}
	}
	sum := total(res)
	if failed != nil {
		if r.Context().Err() == nil {
			a.failWith(w, r, failed, g.Model, genError(failed, g))
		}
		return sum, failed
	}
	bodies := make([]any, n)
	for i, f := range fs {
		bodies[i] = withIndex(f.whole(c, texts[i].String(), res[i].Finish, lps[i], usage(res[i])), i)
	}
	writeJSON(w, http.StatusOK, merged(bodies, usage(sum)))
	return sum, nil
}

// streamed is the writer's state of one choice of a stream.
type streamed struct {
	begun bool
	// held are the logprob entries of tokens whose text is held back:
	// they go with the next chunk that has text, or with the finish
	// chunk.
	held []generate.Logprob
	res  generate.Result
}

// stream writes server-sent events, the choices' chunks interleaved as
// they come, each with its index. Headers go out with the first text, so
// a failure before it is still an ordinary error response. Whatever the
// generations have ready is written at once, in one write: the writer
// never waits for more.
func (a *API) stream(ctx context.Context, w http.ResponseWriter, r *http.Request, reqs []generate.Request, g openai.Generation, c call, fs []format, tm *timing) (generate.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan choiceEvent, queuedEvents)
	a.fanOut(ctx, reqs, events)
	sse := newSSE(w)
	st := make([]streamed, len(reqs))
	var failed error // the first failure: of a choice, or of the client
	gone := false    // the client could not be written to
	for left := len(reqs); left > 0; {
		ev := <-events
		for {
			if ev.end {
				left--
				st[ev.i].res = ev.res
			}
			if failed == nil {
				if err := a.streamEvent(sse, ev, fs[ev.i], &st[ev.i], c, tm); err != nil {
					failed = err
					cancel()
				}
			}
			if left == 0 {
				break
			}
			select {
			case ev = <-events:
				continue
			default:
			}
			break
		}
		if failed == nil {
			if err := sse.flush(); err != nil {
				failed, gone = err, true
				cancel()
			}
		}
	}
	res := make([]generate.Result, len(st))
	for i := range st {
		res[i] = st[i].res
	}
	sum := total(res)
	switch {
	case failed != nil && !sse.started:
		if r.Context().Err() == nil {
			a.failWith(w, r, failed, g.Model, genError(failed, g))
		}
		return sum, failed
	case failed != nil:
		if r.Context().Err() == nil && !gone {
			a.cfg.Logger.WarnContext(ctx, "stream failed mid-way", "completion_id", c.id, "err", failed)
			_ = sse.add(genError(failed, g).Body())
			sse.done()
			_ = sse.flush()
		}
		return sum, failed
	}
	if g.IncludeUsage {
		_ = sse.add(fs[0].usage(c, usage(sum)))
	}
	sse.done()
	return sum, sse.flush()
}

// streamEvent adds the chunks of one event of choice ev.i to sse; an
// error is the choice's failure, or a body that would not encode.
func (a *API) streamEvent(sse *sseWriter, ev choiceEvent, f format, s *streamed, c call, tm *timing) error {
	begin := func() error {
		if !sse.started {
			sse.begin()
		}
		if s.begun {
			return nil
		}
		s.begun = true
		return sse.add(withIndex(f.start(c), ev.i))
	}
	if ev.end {
		if ev.err != nil {
			return ev.err
		}
		if err := begin(); err != nil {
			return err
		}
		err := sse.add(withIndex(f.finish(c, ev.res.Finish, s.held), ev.i))
		s.held = nil
		return err
	}
	if ev.i == 0 {
		tm.observe(ev.d)
	}
	s.held = append(s.held, ev.d.Logprobs...)
	if ev.d.Text == "" {
		return nil
	}
	if err := begin(); err != nil {
		return err
	}
	err := sse.add(withIndex(f.delta(c, ev.d.Text, s.held), ev.i))
	s.held = s.held[:0]
	return err
}

func usage(res generate.Result) openai.Usage {
	return openai.Usage{
		PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens, TotalTokens: res.PromptTokens + res.CompletionTokens,
		PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: res.CachedTokens},
	}
}

// timing records time to first token and inter-token latency.
type timing struct {
	a        *API
	endpoint string
	model    string
	start    time.Time
	last     time.Time
}

func (a *API) timing(endpoint, model string, start time.Time) *timing {
	return &timing{a: a, endpoint: endpoint, model: model, start: start}
}

func (t *timing) observe(d generate.Delta) {
	m := t.a.cfg.Metrics
	if m == nil || len(d.TokenIDs) == 0 {
		return
	}
	now := time.Now()
	if t.last.IsZero() {
		m.TTFT.WithLabelValues(t.endpoint, t.model, d.Served.RouterVersion, d.Served.WorkerVersion).Observe(now.Sub(t.start).Seconds())
	} else {
		per := now.Sub(t.last).Seconds() / float64(len(d.TokenIDs))
		itl := m.ITL.WithLabelValues(t.endpoint, t.model, d.Served.RouterVersion, d.Served.WorkerVersion)
		for range d.TokenIDs {
			itl.Observe(per)
		}
	}
	t.last = now
}

// traceID is the request's trace id, or "" when it is not traced (no
// exporter, or not sampled).
func traceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}
