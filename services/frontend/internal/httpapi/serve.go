package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

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

// format builds an endpoint's response bodies. lps are the logprob
// entries of the tokens the body carries (none without logprobs).
type format interface {
	start(c call) any // first chunk, or nil
	delta(c call, text string, lps []generate.Logprob) any
	finish(c call, reason string, lps []generate.Logprob) any
	usage(c call, u openai.Usage) any
	whole(c call, text, reason string, lps []generate.Logprob, u openai.Usage) any
}

// serve runs a prepared generation and writes the response.
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
	tm := a.timing(endpoint, req.Model, start)
	var res generate.Result
	var err error
	if g.Stream {
		res, err = a.stream(ctx, w, r, req, g, c, f, tm)
	} else {
		var text strings.Builder
		var lps []generate.Logprob
		res, err = a.cfg.Generator.Run(ctx, req, func(d generate.Delta) error {
			tm.observe(d)
			text.WriteString(d.Text)
			lps = append(lps, d.Logprobs...)
			return nil
		})
		if err == nil {
			writeJSON(w, http.StatusOK, f.whole(c, text.String(), res.Finish, lps, usage(res)))
		} else if r.Context().Err() == nil {
			a.failWith(w, r, err, g.Model, genError(err, g))
		}
	}
	if m := a.cfg.Metrics; m != nil {
		m.PromptTokens.WithLabelValues(req.Model).Add(float64(res.PromptTokens))
		m.CompletionTokens.WithLabelValues(req.Model).Add(float64(res.CompletionTokens))
		m.CachedTokens.WithLabelValues(req.Model).Add(float64(res.CachedTokens))
		if err == nil {
			m.Generations.WithLabelValues(req.Model).Inc()
		}
	}
	if err != nil && r.Context().Err() != nil {
		a.cfg.Logger.Debug("client went away", "request_id", c.id, "err", err)
	}
}

// stream writes server-sent events. Headers go out with the first text, so
// a failure before it is still an ordinary error response. The logprob
// entries of tokens whose text is held back go with the next chunk that
// has text, or with the finish chunk.
func (a *API) stream(ctx context.Context, w http.ResponseWriter, r *http.Request, req generate.Request, g openai.Generation, c call, f format, tm *timing) (generate.Result, error) {
	sse := newSSE(w)
	begin := func() error {
		if sse.started {
			return nil
		}
		sse.begin()
		if first := f.start(c); first != nil {
			return sse.event(first)
		}
		return nil
	}
	var held []generate.Logprob
	res, err := a.cfg.Generator.Run(ctx, req, func(d generate.Delta) error {
		tm.observe(d)
		held = append(held, d.Logprobs...)
		if d.Text == "" {
			return nil
		}
		if err := begin(); err != nil {
			return err
		}
		ev := f.delta(c, d.Text, held)
		held = held[:0]
		return sse.event(ev)
	})
	switch {
	case err != nil && !sse.started:
		if r.Context().Err() == nil {
			a.failWith(w, r, err, g.Model, genError(err, g))
		}
		return res, err
	case err != nil:
		if r.Context().Err() == nil {
			a.cfg.Logger.Warn("stream failed mid-way", "request_id", c.id, "err", err)
			_ = sse.event(genError(err, g).Body())
			_ = sse.done()
		}
		return res, err
	}
	if err := begin(); err != nil {
		return res, err
	}
	_ = sse.event(f.finish(c, res.Finish, held))
	if g.IncludeUsage {
		_ = sse.event(f.usage(c, usage(res)))
	}
	return res, sse.done()
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
		m.TTFT.WithLabelValues(t.endpoint, t.model).Observe(now.Sub(t.start).Seconds())
	} else {
		per := now.Sub(t.last).Seconds() / float64(len(d.TokenIDs))
		itl := m.ITL.WithLabelValues(t.endpoint, t.model)
		for range d.TokenIDs {
			itl.Observe(per)
		}
	}
	t.last = now
}
