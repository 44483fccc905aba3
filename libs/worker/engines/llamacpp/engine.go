package llamacpp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/worker/engines"
	"switchyard.dev/libs/worker/engines/tokstream"
)

// Config configures an Engine.
type Config struct {
	// URL is llama-server's base URL, http://host:port.
	URL string
	// Model is the served name the worker announces; llama-server must
	// serve it (its model id, or an --alias). Empty takes the server's
	// own name (ModelInfo().Name).
	Model string
	// Tokenizer is the model's tokenizer, as the frontend has it: it
	// decodes the text of stop strings, and its vocabulary must be the
	// engine's.
	Tokenizer tokenizer.Tokenizer
	// BlockSize is the token count of a KV event's block.
	BlockSize int
	// KVEvents publishes KV events synthesized from the slots' mirrors;
	// off, the worker publishes none and the router approximates.
	KVEvents bool
	// EventBuffer is how many event batches subscribers can resume
	// within (default 1024).
	EventBuffer int
	// PollInterval is how often health and load are read (default 1s).
	PollInterval time.Duration
	HTTP         *http.Client
	Logger       *slog.Logger
}

// Engine drives one llama-server (an engines.Engine).
type Engine struct {
	cfg     Config
	c       *client
	info    engine.ModelInfo
	model   tokstream.Model
	slots   *slots
	journal *kvevent.Journal
	log     *slog.Logger

	healthy  atomic.Bool
	down     chan error // Down's reports, for Run
	load     atomic.Pointer[serverLoad]
	mismatch atomic.Int64 // requests whose cached prefix differed from the mirror's
}

// serverLoad is the latest scrape.
type serverLoad struct {
	m    serverMetrics
	busy int
}

var _ engines.Engine = (*Engine)(nil)

// Open checks that the server at cfg.URL answers and serves cfg.Model
// with cfg.Tokenizer's vocabulary, and returns an Engine for it. Every
// error names what to change.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Tokenizer == nil {
		return nil, errors.New("llamacpp: a tokenizer is required")
	}
	if cfg.BlockSize <= 0 {
		return nil, fmt.Errorf("llamacpp: block size %d: must be positive", cfg.BlockSize)
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.EventBuffer <= 0 {
		cfg.EventBuffer = 1024
	}
	e := &Engine{cfg: cfg, c: &client{base: strings.TrimSuffix(cfg.URL, "/"), http: cfg.HTTP}, log: cfg.Logger, down: make(chan error, 1)}
	p, err := e.identify(ctx)
	if err != nil {
		return nil, err
	}
	tok := cfg.Tokenizer
	e.info = engine.ModelInfo{
		Name: e.cfg.Model, VocabSize: tok.VocabSize(), ContextLen: p.Settings.NCtx, BlockSize: cfg.BlockSize,
		NumBlocks: p.TotalSlots * (p.Settings.NCtx / cfg.BlockSize), BOS: tok.BOS(), EOS: tok.EOS(),
		StopTokens: []uint32{tok.EOS(), tok.BOS()},
	}
	e.model = tokstream.Model{Tokenizer: tok, StopTokens: e.info.StopTokens, VocabSize: e.info.VocabSize, ContextLen: e.info.ContextLen}
	if cfg.KVEvents {
		e.journal = kvevent.NewJournalAfter(cfg.EventBuffer, kvevent.RandomStart())
	}
	e.slots = newSlots(p.TotalSlots, cfg.BlockSize, e.journal)
	e.healthy.Store(true)
	e.load.Store(&serverLoad{})
	return e, nil
}

// identify reads what the server serves and checks it against the
// configuration.
func (e *Engine) identify(ctx context.Context) (props, error) {
	base := e.c.base
	if err := e.c.health(ctx); err != nil {
		return props{}, fmt.Errorf("%w: llama-server at %s does not answer: %w", engines.ErrUnavailable, base, err)
	}
	var p props
	if err := e.c.getJSON(ctx, "/props", &p); err != nil {
		return props{}, fmt.Errorf("llama-server at %s: %w", base, err)
	}
	models, err := e.c.models(ctx)
	if err != nil {
		return props{}, fmt.Errorf("llama-server at %s: %w", base, err)
	}
	if e.cfg.Model == "" && len(models) > 0 {
		// No name configured: the server's own (its first alias, else its
		// model id).
		e.cfg.Model = models[0].ID
		if len(models[0].Aliases) > 0 {
			e.cfg.Model = models[0].Aliases[0]
		}
	}
	var names []string
	var m *model
	for i := range models {
		if models[i].ID == e.cfg.Model || slices.Contains(models[i].Aliases, e.cfg.Model) {
			m = &models[i]
		}
		names = append(names, models[i].ID)
		names = append(names, models[i].Aliases...)
	}
	bs := e.cfg.BlockSize
	switch vocab := e.cfg.Tokenizer.VocabSize(); {
	case m == nil:
		return props{}, fmt.Errorf("llama-server at %s serves %q, not model %q: start it with --alias %s, or serve it under one of those names", base, slices.Compact(names), e.cfg.Model, e.cfg.Model)
	case m.Meta.NVocab != 0 && m.Meta.NVocab != vocab:
		return props{}, fmt.Errorf("llama-server at %s: model %q has %d tokens, the worker's tokenizer %d: not the same model", base, e.cfg.Model, m.Meta.NVocab, vocab)
	case p.TotalSlots < 1:
		return props{}, fmt.Errorf("llama-server at %s reports %d slots", base, p.TotalSlots)
	case p.Settings.NCtx < 2*bs:
		return props{}, fmt.Errorf("llama-server at %s holds %d tokens a slot, under two %d-token blocks: start it with a larger --ctx-size (per slot: ctx-size / parallel), or the worker with a smaller -block-size", base, p.Settings.NCtx, bs)
	}
	if !p.EndpointMetrics || !p.EndpointSlots {
		e.log.Warn("llama-server runs without --metrics or --slots: its load is the worker's own count", "url", base)
	}
	return p, nil
}

// ModelInfo implements engines.Engine.
func (e *Engine) ModelInfo() engine.ModelInfo {
	mi := e.info
	mi.StopTokens = slices.Clone(mi.StopTokens)
	return mi
}

// KV implements engines.Engine: the synthesized journal, or nil.
func (e *Engine) KV() engines.KVEvents {
	if e.journal == nil {
		return nil
	}
	return kvJournal{e}
}

type kvJournal struct{ e *Engine }

func (k kvJournal) Subscribe(after uint64) *kvevent.Subscription { return k.e.journal.Subscribe(after) }
func (k kvJournal) Dump() kvevent.Batch                          { return k.e.slots.dump() }
func (k kvJournal) EventSeq() uint64                             { return k.e.journal.Last() }

// Validate implements engines.Engine: the built-in engine's checks, and a
// refusal of what llama-server cannot do as the built-in engine does.
func (e *Engine) Validate(r engine.Request) error {
	if err := tokstream.Validate(e.model, r); err != nil {
		return err
	}
	p := r.Sampling
	for _, u := range []struct {
		field string
		on    bool
	}{
		{"sampling.logprobs", p.Logprobs},
		{"sampling.presence_penalty", p.PresencePenalty != 0},
		{"sampling.frequency_penalty", p.FrequencyPenalty != 0},
		{"sampling.logit_bias", len(p.LogitBias) > 0},
		{"sampling.constraint", p.Format != (engine.Request{}).Sampling.Format},
	} {
		if u.on {
			return tokstream.Invalid(u.field, engine.ErrInvalidSampling, "request %q: %s is not supported by a llama.cpp worker", r.ID, u.field)
		}
	}
	return nil
}

// Metrics implements engines.Engine from the worker's own slot counts
// and the latest scrape of the server's /metrics and /slots.
func (e *Engine) Metrics() engine.Metrics {
	busy, waiting, used, cached := e.slots.load()
	l := e.load.Load()
	return engine.Metrics{
		Running: max(busy, l.busy, int(l.m.processing)), Waiting: waiting + int(l.m.deferred),
		KVUsedBlocks: used, KVTotalBlocks: e.info.NumBlocks, KVCachedBlocks: cached,
		PromptTokens: int64(l.m.promptTokens + l.m.cachedTok), PrefixHitTokens: int64(l.m.cachedTok),
		GeneratedTokens: int64(l.m.predicted), TokensPerSecond: l.m.predictedTPS,
	}
}

// MirrorMismatches counts requests for which llama-server served another
// number of cached prompt tokens than the slot's mirror predicted: 0
// unless something else uses the server's slots, or it runs with a host
// prompt cache (--cache-ram) that the mirrors do not model.
func (e *Engine) MirrorMismatches() int64 { return e.mismatch.Load() }

// Generate implements engines.Engine. The request waits for a slot in the
// worker (by priority, then arrival), is pinned to it with id_slot, and is
// streamed back token by token; a stream that ends here (stop token or
// string, limit, cancellation) closes its HTTP response, which
// llama-server takes as the end of the request.
func (e *Engine) Generate(ctx context.Context, r engine.Request) (engines.Stream, error) {
	if err := e.Validate(r); err != nil {
		return nil, err
	}
	if !e.healthy.Load() {
		return nil, fmt.Errorf("%w: llama-server at %s is down", engines.ErrUnavailable, e.c.base)
	}
	ctx, cancel := context.WithCancel(ctx)
	st := tokstream.New(e.model, r, cancel)
	go e.serve(ctx, cancel, st, r)
	return st, nil
}

// serve runs one request on a slot, and frees the slot (recording what it
// caches) before the stream's final output is seen.
func (e *Engine) serve(ctx context.Context, cancel context.CancelFunc, st *tokstream.Stream, r engine.Request) {
	defer cancel()
	start := time.Now()
	id, keep, epoch, err := e.slots.acquire(ctx, r.Prompt, r.Priority)
	if err != nil {
		st.End(engine.FinishCancelled, err)
		return
	}
	st.SetQueueTime(time.Since(start))
	held, reason, err := e.stream(ctx, st, r, id, keep, epoch)
	cancel() // ended here: llama-server drops the request with its connection
	e.slots.release(id, epoch, held)
	st.End(reason, err)
}

// stream runs r on slot id and returns what the slot caches afterwards
// and how the engine ended the stream (when Token did not end it first).
func (e *Engine) stream(ctx context.Context, st *tokstream.Stream, r engine.Request, id, keep int, epoch uint64) ([]uint32, engine.FinishReason, error) {
	held := r.Prompt[:keep]
	cs, err := e.c.complete(ctx, e.body(r, id))
	if err != nil {
		reason, err := e.endReason(ctx, err)
		return held, reason, err
	}
	defer cs.close()
	var gen []uint32
	var c chunk
	drain := false // finished here, and llama-server ends the request too
	for {
		if err := cs.next(&c); err != nil {
			reason, err := e.endReason(ctx, err)
			return sure(r.Prompt, held, gen), reason, err
		}
		if c.Error != nil {
			return sure(r.Prompt, held, gen), engine.FinishError, fmt.Errorf("llama-server: %s", c.Error.Message)
		}
		if len(gen) == 0 && len(c.Tokens) > 0 {
			e.prefilled(st, c, r.Prompt, id, keep, epoch)
			held = r.Prompt
		}
		for _, t := range c.Tokens {
			if drain || st.Finished() {
				break
			}
			gen = append(gen, t)
			if !st.Token(t) {
				drain = e.endsItself(r, t, len(gen))
			}
		}
		if c.Stop {
			// llama-server ended the request: the slot caches what it says.
			all := append(slices.Clip(r.Prompt), gen...)
			return all[:min(c.TokensCached, len(all))], finishOf(c.StopType), nil
		}
		if st.Finished() && !drain {
			return sure(r.Prompt, held, gen), engine.FinishStop, nil
		}
	}
}

// sure is what a slot is known to cache when its request was broken off:
// the prompt and every generated token but the last (decoded only to
// sample the next), or held when no token came.
func sure(prompt, held, gen []uint32) []uint32 {
	if len(gen) == 0 {
		return held
	}
	return append(slices.Clip(prompt), gen[:len(gen)-1]...)
}

// prefilled handles the first token: the slot now caches the prompt, and
// llama-server says how much of it it found cached.
func (e *Engine) prefilled(st *tokstream.Stream, c chunk, prompt []uint32, id, keep int, epoch uint64) {
	if c.Timings != nil {
		st.SetCached(c.Timings.CacheN)
		// llama-server recomputes the last prompt token even when all of
		// it is cached, to sample from it.
		if want := min(keep, len(prompt)-1); c.Timings.CacheN != want {
			e.mismatch.Add(1)
			e.log.Debug("slot cache differs from the mirror", "slot", id, "cached", c.Timings.CacheN, "mirror", want)
		}
	}
	e.slots.cached(id, epoch, prompt)
}

// endsItself reports whether llama-server ends r by itself after its n-th
// token tok, which ended the stream here: at its n_predict, or at its own
// end-of-generation token. Its final event then comes at once, and is read
// so the connection is reused and the slot's cache length known; any other
// stop (BOS, a stop token or string) is the worker's, and the request is
// cancelled.
func (e *Engine) endsItself(r engine.Request, tok uint32, n int) bool {
	return n >= tokstream.MaxNew(e.model, r) || tok == e.info.EOS && !r.Stop.IgnoreEOS
}

// endReason is the finish of a stream whose HTTP exchange failed.
func (e *Engine) endReason(ctx context.Context, err error) (engine.FinishReason, error) {
	if ctx.Err() != nil {
		return engine.FinishCancelled, ctx.Err()
	}
	if he, ok := errors.AsType[*httpError](err); ok && he.status == http.StatusBadRequest {
		return engine.FinishError, &engine.FieldError{Field: "token_ids", Err: fmt.Errorf("llama-server refused the request: %s: %w", he.msg, engine.ErrInvalidRequest)}
	}
	return engine.FinishError, fmt.Errorf("%w: llama-server at %s: %w", engines.ErrUnavailable, e.c.base, err)
}

// finishOf maps llama-server's stop_type.
func finishOf(stopType string) engine.FinishReason {
	if stopType == "eos" || stopType == "word" {
		return engine.FinishStop
	}
	return engine.FinishLength
}

// body is r as a /completion request on slot id.
func (e *Engine) body(r engine.Request, id int) *completion {
	p := r.Sampling
	b := &completion{
		Prompt: r.Prompt, NPredict: tokstream.MaxNew(e.model, r), Stream: true, ReturnToken: true, IDSlot: id,
		CachePrompt: true, TimingsPerToken: true, IgnoreEOS: r.Stop.IgnoreEOS,
		Temperature: p.Temperature, TopK: p.TopK, TopP: p.TopP,
		TypicalP: 1, RepeatPenalty: 1, TopNSigma: -1,
	}
	if b.TopP == 0 {
		b.TopP = 1
	}
	if p.Seed != nil {
		s := uint32(*p.Seed % math.MaxUint32) // llama.cpp's seeds are 32-bit; MaxUint32 means random
		b.Seed = &s
	}
	return b
}

// Close implements engines.Engine; the server is not the engine's to stop.
func (e *Engine) Close() error { return nil }
