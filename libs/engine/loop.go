package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/sample"
	"switchyard.dev/libs/engine/sched"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/kvhash"
)

// request is the engine's state for one submitted request.
type request struct {
	id        uint64
	r         Request
	seq       *sched.Seq
	stream    *Stream
	sampler   *sample.Sampler
	seed      uint64 // request seed, or a hash of the prompt (executors without logits)
	text      *tokenizer.TextStream
	stops     map[uint32]bool
	completer completer // the constraint, when it can tell its value is complete
	generated int
	stopCtx   func() bool
	submitted time.Time
	queue     time.Duration // Submit to first scheduled step; -1 until then
}

// newRequest builds r's state, hashing its prompt into the sequence's
// block hashes, with c (nil for free text) constraining its sampler;
// Submit assigns the id. It needs no lock.
func newRequest(e *Engine, r Request, c sample.Constraint) *request {
	// Without a request seed the sampler draws a random one, and executors
	// without logits get a hash of the prompt instead.
	samplerSeed, seed := rand.Uint64(), kvhash.Local(r.Prompt, r.CacheSalt)
	if r.Sampling.Seed != nil {
		samplerSeed, seed = *r.Sampling.Seed, *r.Sampling.Seed
	}
	req := &request{
		r:       r,
		stream:  newStream(r.ID),
		sampler: sample.New(r.Sampling, samplerSeed),
		seed:    seed,
		seq: &sched.Seq{
			Tokens: slices.Clone(r.Prompt), PromptLen: len(r.Prompt),
			Priority: r.Priority, Salt: r.CacheSalt, Ready: r.Ready,
		},
		text:      tokenizer.NewTextStream(e.tok, r.Prompt[len(r.Prompt)-1], r.Stop.StopStrings),
		stops:     make(map[uint32]bool),
		submitted: time.Now(), queue: -1,
	}
	req.seq.Arrived = req.submitted.UnixNano()
	if !r.Arrival.IsZero() && r.Arrival.Before(req.submitted) {
		req.seq.Arrived = r.Arrival.UnixNano()
	}
	req.seq.BlockHashes(e.cfg.BlockSize)
	if c != nil {
		// onToken ends the request at MaxTokens or when the sequence
		// fills the context, whichever comes first.
		budget := e.OutputBudget(r)
		if r.FormatBudget > 0 {
			budget = r.FormatBudget
		}
		req.sampler.Constrain(c, budget)
		req.completer, _ = c.(completer)
	}
	for _, t := range r.Stop.StopTokenIDs {
		req.stops[t] = true
	}
	if !r.Stop.IgnoreEOS {
		for _, t := range e.model.StopTokens {
			req.stops[t] = true
		}
	}
	return req
}

func (r *request) usage() Usage {
	return Usage{PromptTokens: len(r.r.Prompt), CompletionTokens: r.generated, CachedPromptTokens: r.seq.CachedPromptTokens()}
}

// plan applies cancellations and schedules the next step.
func (e *Engine) plan() *sched.Plan {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.applyCancels()
	p := e.sched.Schedule()
	for _, q := range p.Failed {
		if r, ok := e.reqs[q.ID]; ok {
			err := fmt.Errorf("%w: %d tokens, %d blocks of %d", ErrKVCapacity, len(q.Tokens), e.kv.NumBlocks(), e.kv.BlockSize())
			e.finish(r, FinishError, err, nil)
		}
	}
	if n := len(p.Preempted); n > 0 {
		e.log.Debug("preempted sequences for KV space", "count", n, "free_blocks", e.kv.Available())
	}
	e.stats.planned(p)
	return p
}

func (e *Engine) applyCancels() {
	for _, id := range e.cancelled {
		if r, ok := e.reqs[id]; ok {
			e.finish(r, FinishCancelled, context.Canceled, nil)
		}
	}
	e.cancelled = e.cancelled[:0]
}

func (e *Engine) fillBatch(b *executor.Batch, p *sched.Plan) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b.Items = b.Items[:0]
	for _, it := range p.Items {
		r := e.reqs[it.Seq.ID]
		if r.queue < 0 {
			r.queue = time.Since(r.submitted)
		}
		if it.Sample && r.generated == 0 && r.r.FirstToken != nil {
			r.sampler.Force(*r.r.FirstToken) // its logprob, not the draw's
		}
		b.Items = append(b.Items, executor.Item{
			SeqID: it.Seq.ID, Tokens: it.Seq.Tokens, PromptLen: it.Seq.PromptLen,
			Start: it.Start, End: it.End, Blocks: it.Seq.Blocks(),
			Sample: it.Sample, Sampler: r.sampler, Seed: r.seed,
		})
	}
	StepStats(b, p, e.kv)
}

// complete records a finished step: tokens, outputs, stops, events.
func (e *Engine) complete(p *sched.Plan, b *executor.Batch, err error, took time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.applyCancels()
	if err != nil {
		e.log.Warn("executor step failed", "error", err, "items", len(b.Items))
		for _, it := range p.Items {
			if r, ok := e.reqs[it.Seq.ID]; ok {
				e.finish(r, FinishError, fmt.Errorf("engine: step failed: %w", err), nil)
			}
		}
		e.flushEvents()
		return
	}
	sampled := make([]uint32, len(b.Items))
	for i := range b.Items {
		sampled[i] = b.Items[i].Out
		if r, ok := e.reqs[p.Items[i].Seq.ID]; ok && b.Items[i].Sample && r.generated == 0 && r.r.FirstToken != nil {
			if sampled[i] != *r.r.FirstToken {
				e.stats.firstMismatch++
			}
			sampled[i] = *r.r.FirstToken
		}
	}
	e.sched.Complete(p, sampled)
	tokens := 0
	for i, it := range p.Items {
		r, ok := e.reqs[it.Seq.ID]
		if !ok || !it.Sample || !it.Seq.Running() {
			continue
		}
		tokens++
		e.onToken(r, sampled[i])
	}
	if e.tiers != nil {
		e.tiers.observeStep(p.PrefillTokens, p.DecodeTokens, e.cfg.BlockSize, took)
		e.offloadCommitted()
	}
	e.flushEvents()
	e.stats.completed(took, tokens)
}

// onToken handles one emitted token (after a prefill worker's first
// token replaced the draw): the sampler's penalties and constraint, stop
// tokens, stop strings, limits. It runs once per emitted token, never for
// a recomputed one, which keeps the penalties exact under preemption.
func (e *Engine) onToken(r *request, tok uint32) {
	r.generated++
	if err := r.sampler.Accept(tok); err != nil {
		e.finish(r, FinishError, fmt.Errorf("engine: request %q, output position %d: %w", r.r.ID, r.generated-1, err), nil)
		return
	}
	if r.stops[tok] || e.endsValue(r, tok) {
		e.finish(r, FinishStop, nil, nil)
		return
	}
	text, stopped := r.text.Push(tok)
	out := Output{TokenIDs: []uint32{tok}, Text: text}
	if r.r.Sampling.Logprobs {
		lp, ok := r.sampler.TakeLogprob()
		if !ok { // validate admits logprobs only with an executor that samples
			e.finish(r, FinishError, fmt.Errorf("engine: no logprob was recorded for token %d", tok), nil)
			return
		}
		out.Logprobs = []sample.Logprob{lp}
	}
	if r.generated == 1 {
		out.QueueTime = max(r.queue, 0)
	}
	switch {
	case stopped:
		e.finish(r, FinishStop, nil, &out)
	case r.generated >= r.r.Stop.MaxTokens || len(r.seq.Tokens) >= e.maxLen:
		e.finish(r, outOfRoom(r), nil, &out)
	default:
		out.Usage = r.usage()
		r.stream.push(out)
	}
}

// finish ends r: frees its blocks and pushes the final output (merged into
// last when given).
func (e *Engine) finish(r *request, reason FinishReason, err error, last *Output) {
	out := Output{}
	if last != nil {
		out = *last
	}
	if reason == FinishStop || reason == FinishLength {
		out.Text += r.text.Flush()
	}
	out.Finish, out.Err, out.Usage = reason, err, r.usage()
	e.sched.Abort(r.seq)
	delete(e.reqs, r.id)
	r.stopCtx()
	r.stream.push(out)
}

func (e *Engine) flushEvents() {
	ev := e.kv.TakeEvents()
	if e.tiers != nil {
		ev = append(ev, e.tiers.takeEvents(e.cfg.BlockSize)...)
	}
	e.journal.Append(ev)
}
