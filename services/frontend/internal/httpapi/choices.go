package httpapi

import (
	"context"
	"strconv"

	"google.golang.org/protobuf/proto"

	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/openai"
)

// A request's n choices are n generations of one prompt, each routed and
// migrated on its own, and run concurrently. Choice 0 starts at once; the
// others once it has its first output, asking for its worker
// (generate.Request.PreferWorker): by then that worker's prefix cache
// holds the prompt's full blocks, so the other choices reuse them instead
// of each computing the prompt wherever the router would send it. They
// start one time-to-first-token later, and a choice whose preferred
// worker is refused goes wherever the router sends it.
//
// Any choice failing fails the request: the others are cancelled, and the
// client gets the error (an error status, or an error event ending the
// stream), as it would for one choice.

// choiceEvent is a delta of choice i, or (end) how choice i ended.
type choiceEvent struct {
	i   int
	d   generate.Delta
	end bool
	res generate.Result
	err error
}

// queuedEvents is how far the generations may run ahead of the writer
// before they wait for it.
const queuedEvents = 64

// choiceRequests are req for each of g's choices: choice i has its own
// request id and, in a seeded request, seed+i.
func choiceRequests(req generate.Request, g openai.Generation) []generate.Request {
	reqs := make([]generate.Request, g.N)
	reqs[0] = req
	for i := 1; i < g.N; i++ {
		r := req
		r.ID = req.ID + "-" + strconv.Itoa(i)
		r.Sampling = proto.CloneOf(req.Sampling)
		r.Sampling.Seed = openai.SeedFor(g.Seed, i)
		reqs[i] = r
	}
	return reqs
}

// fanOut runs reqs, the choices of one request, and sends their deltas,
// in order for each choice, then each one's end, to out. The caller must
// receive until every choice has ended.
func (a *API) fanOut(ctx context.Context, reqs []generate.Request, out chan<- choiceEvent) {
	first := make(chan string, 1)
	go a.runChoice(ctx, 0, reqs[0], out, first)
	if len(reqs) == 1 {
		return
	}
	go func() {
		worker := ""
		select {
		case worker = <-first:
		case <-ctx.Done():
		}
		for i := 1; i < len(reqs); i++ {
			if err := ctx.Err(); err != nil {
				out <- choiceEvent{i: i, end: true, err: err}
				continue
			}
			reqs[i].PreferWorker = worker
			go a.runChoice(ctx, i, reqs[i], out, nil)
		}
	}()
}

// runChoice runs choice i. If first is set, it is sent the worker of the
// choice's first delta, or "" when the choice succeeded without one; a
// choice that fails first sends nothing (the request fails).
func (a *API) runChoice(ctx context.Context, i int, req generate.Request, out chan<- choiceEvent, first chan<- string) {
	signal := func(worker string) {
		if first != nil {
			first <- worker
			first = nil
		}
	}
	res, err := a.cfg.Generator.Run(ctx, req, func(d generate.Delta) error {
		signal(d.Worker)
		select {
		case out <- choiceEvent{i: i, d: d}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	if err == nil {
		signal("")
	}
	out <- choiceEvent{i: i, end: true, res: res, err: err}
}

// total sums the choices' results as OpenAI counts usage: the prompt
// once (and its cached tokens as choice 0 found them), the completions
// of every choice.
func total(res []generate.Result) generate.Result {
	t := res[0]
	for _, r := range res[1:] {
		t.CompletionTokens += r.CompletionTokens
		t.Migrations += r.Migrations
	}
	return t
}

// forks returns a format for each of n choices.
func forks(f format, n int) []format {
	fs := make([]format, n)
	fs[0] = f
	for i := 1; i < n; i++ {
		fs[i] = f.fork()
	}
	return fs
}

// fork implements format: the tool reply reader keeps one reply's state.
func (f chatFormat) fork() format {
	if f.tools != nil {
		f.tools = newToolReply(f.tools.use, f.tools.newID)
	}
	return f
}

// withIndex sets the choice index of a format's body (or bodies) to i.
// Formats build choice 0.
func withIndex(v any, i int) any {
	if i == 0 {
		return v
	}
	switch b := v.(type) {
	case openai.ChatChunk:
		for j := range b.Choices {
			b.Choices[j].Index = i
		}
		return b
	case openai.Completion:
		for j := range b.Choices {
			b.Choices[j].Index = i
		}
		return b
	case openai.ChatCompletion:
		for j := range b.Choices {
			b.Choices[j].Index = i
		}
		return b
	case []any:
		for k := range b {
			b[k] = withIndex(b[k], i)
		}
	}
	return v
}

// merged is the whole response of several choices: the first body with
// every body's choices, in order, and u as its usage.
func merged(bodies []any, u openai.Usage) any {
	switch first := bodies[0].(type) {
	case openai.ChatCompletion:
		for _, b := range bodies[1:] {
			first.Choices = append(first.Choices, b.(openai.ChatCompletion).Choices...)
		}
		first.Usage = &u
		return first
	case openai.Completion:
		for _, b := range bodies[1:] {
			first.Choices = append(first.Choices, b.(openai.Completion).Choices...)
		}
		first.Usage = &u
		return first
	}
	return bodies[0]
}
