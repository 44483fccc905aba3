// Package vllmworker puts a vLLM or SGLang server behind the worker's
// engine seam (package engines): generation through engines/vllm's
// client, with stop conditions, text and limits applied by tokstream as
// the built-in engine applies them; load from the engine's Prometheus
// metrics, read every poll interval; and the engine's ZeroMQ KV events
// re-hashed by engines/rehash into the journal the router follows.
//
// The engine stops by itself at its own EOS token (unless the request
// ignores EOS) and at the token limit; every other stop (BOS, a stop
// token or string) is the worker's, and closes the engine's stream, which
// both engines take as an abort. Cached prompt tokens come in the
// engine's last usage chunk, so a stream the worker stopped first reports
// none.
package vllmworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/vllmevents"
	"switchyard.dev/libs/worker/engines"
	"switchyard.dev/libs/worker/engines/rehash"
	"switchyard.dev/libs/worker/engines/tokstream"
	"switchyard.dev/libs/worker/engines/vllm"
)

// Config configures an Engine.
type Config struct {
	Kind      vllm.Kind
	URL       string
	Model     string
	Tokenizer tokenizer.Tokenizer
	BlockSize int
	// ContextLen bounds prompt plus output; 0 reads vLLM's max_model_len
	// from /v1/models.
	ContextLen int
	// Events, when set, is the engine's KV event publisher; without it the
	// worker publishes no KV events (the router approximates).
	Events       *vllmevents.Config
	EventBuffer  int
	PollInterval time.Duration
	HTTP         *http.Client
	Logger       *slog.Logger
}

// Engine drives one vLLM or SGLang server.
type Engine struct {
	cfg     Config
	c       *vllm.Client
	info    engine.ModelInfo
	model   tokstream.Model
	rehash  *rehash.Rehasher
	log     *slog.Logger
	healthy atomic.Bool
	load    atomic.Pointer[vllm.Load]
	running atomic.Int64 // streams open through this worker
}

var _ engines.Engine = (*Engine)(nil)

// Open checks that the engine answers, serves cfg.Model and caches blocks
// of cfg.BlockSize tokens, and returns an Engine for it.
func Open(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.Tokenizer == nil {
		return nil, errors.New("vllmworker: a tokenizer is required")
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
	c, err := vllm.New(vllm.Config{Kind: cfg.Kind, URL: cfg.URL, Model: cfg.Model, HTTP: cfg.HTTP})
	if err != nil {
		return nil, err
	}
	if err := c.Check(ctx, cfg.Model, cfg.BlockSize); err != nil {
		return nil, err
	}
	if cfg.ContextLen == 0 {
		if cfg.ContextLen, err = maxModelLen(ctx, cfg); err != nil {
			return nil, err
		}
	}
	tok := cfg.Tokenizer
	e := &Engine{cfg: cfg, c: c, log: cfg.Logger}
	e.info = engine.ModelInfo{Name: cfg.Model, VocabSize: tok.VocabSize(), ContextLen: cfg.ContextLen, BlockSize: cfg.BlockSize,
		BOS: tok.BOS(), EOS: tok.EOS(), StopTokens: []uint32{tok.EOS(), tok.BOS()}}
	e.model = tokstream.Model{Tokenizer: tok, StopTokens: e.info.StopTokens, VocabSize: e.info.VocabSize, ContextLen: e.info.ContextLen}
	if l, err := c.Load(ctx); err == nil {
		e.setLoad(l)
	} else {
		e.load.Store(&vllm.Load{})
		e.log.Warn("engine metrics", "err", err)
	}
	if cfg.Events != nil {
		if e.rehash, err = rehash.New(rehash.Config{BlockSize: cfg.BlockSize, EventBuffer: cfg.EventBuffer, Logger: cfg.Logger}); err != nil {
			return nil, err
		}
	}
	e.healthy.Store(true)
	return e, nil
}

// maxModelLen reads vLLM's max_model_len for cfg.Model from /v1/models.
func maxModelLen(ctx context.Context, cfg Config) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.URL, "/")+"/v1/models", nil)
	if err != nil {
		return 0, err
	}
	res, err := cfg.HTTP.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s engine at %s: %w", cfg.Kind, cfg.URL, err)
	}
	defer res.Body.Close()
	var m struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 4<<20)).Decode(&m); err != nil {
		return 0, fmt.Errorf("%s engine at %s: /v1/models: %w", cfg.Kind, cfg.URL, err)
	}
	for _, d := range m.Data {
		if d.ID == cfg.Model && d.MaxModelLen > 0 {
			return d.MaxModelLen, nil
		}
	}
	return 0, fmt.Errorf("%s engine at %s states no max_model_len for %q", cfg.Kind, cfg.URL, cfg.Model)
}

func (e *Engine) setLoad(l vllm.Load) { e.load.Store(&l) }

// ModelInfo implements engines.Engine.
func (e *Engine) ModelInfo() engine.ModelInfo {
	mi := e.info
	mi.StopTokens = slices.Clone(mi.StopTokens)
	return mi
}

// KV implements engines.Engine.
func (e *Engine) KV() engines.KVEvents {
	if e.rehash == nil {
		return nil
	}
	return e.rehash
}

// Validate implements engines.Engine.
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
		{"sampling.constraint", p.Format.JSONObject || p.Format.JSONSchema != ""},
	} {
		if u.on {
			return tokstream.Invalid(u.field, engine.ErrInvalidSampling, "request %q: %s is not supported by a %s worker", r.ID, u.field, e.cfg.Kind)
		}
	}
	return nil
}

// Metrics implements engines.Engine from the latest scrape.
func (e *Engine) Metrics() engine.Metrics {
	l := e.load.Load()
	total, _ := strconv.Atoi(l.CacheConfig["num_gpu_blocks"])
	return engine.Metrics{
		Running: max(l.Running, int(e.running.Load())), Waiting: l.Waiting,
		KVTotalBlocks: total, KVUsedBlocks: int(math.Round(l.KVUsage * float64(total))),
	}
}

// Generate implements engines.Engine.
func (e *Engine) Generate(ctx context.Context, r engine.Request) (engines.Stream, error) {
	if err := e.Validate(r); err != nil {
		return nil, err
	}
	if !e.healthy.Load() {
		return nil, fmt.Errorf("%w: %s engine at %s is down", engines.ErrUnavailable, e.cfg.Kind, e.cfg.URL)
	}
	ctx, cancel := context.WithCancel(ctx)
	st := tokstream.New(e.model, r, cancel)
	go e.serve(ctx, cancel, st, r)
	return st, nil
}

func (e *Engine) serve(ctx context.Context, cancel context.CancelFunc, st *tokstream.Stream, r engine.Request) {
	defer cancel()
	e.running.Add(1)
	defer e.running.Add(-1)
	p := r.Sampling
	req := vllm.Request{ID: r.ID, Prompt: r.Prompt, MaxTokens: tokstream.MaxNew(e.model, r),
		Temperature: float64(p.Temperature), TopP: float64(p.TopP), TopK: p.TopK, IgnoreEOS: r.Stop.IgnoreEOS}
	if p.Seed != nil {
		req.Seed, req.HasSeed = *p.Seed, true
	}
	s, err := e.c.Generate(ctx, req)
	if err != nil {
		st.End(e.endReason(ctx, err))
		return
	}
	defer s.Close()
	finish, stopped := "", false
	for {
		ch, err := s.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			st.End(e.endReason(ctx, err))
			return
		}
		for _, t := range ch.Tokens {
			if stopped = stopped || !st.Token(t); stopped {
				break
			}
		}
		if ch.FinishReason != "" {
			finish = ch.FinishReason
		}
		if stopped && finish == "" {
			_ = s.Close() // stopped here: closing aborts it in the engine
			st.End(engine.FinishStop, nil)
			return
		}
	}
	if u, ok := s.Usage(); ok && u.HasCachedTokens {
		st.SetCached(u.CachedTokens)
	}
	switch finish {
	case vllm.FinishStop:
		st.End(engine.FinishStop, nil)
	case vllm.FinishLength:
		st.End(engine.FinishLength, nil)
	default:
		st.End(engine.FinishError, fmt.Errorf("%w: the %s engine aborted the request", engines.ErrUnavailable, e.cfg.Kind))
	}
}

func (e *Engine) endReason(ctx context.Context, err error) (engine.FinishReason, error) {
	if ctx.Err() != nil {
		return engine.FinishCancelled, ctx.Err()
	}
	if ee, ok := errors.AsType[*vllm.EngineError](err); ok && ee.BadRequest() {
		return engine.FinishError, &engine.FieldError{Field: "token_ids", Err: fmt.Errorf("%w: %w", err, engine.ErrInvalidRequest)}
	}
	return engine.FinishError, fmt.Errorf("%w: %w", engines.ErrUnavailable, err)
}

// Run implements engines.Engine: it follows the engine's KV events (when
// configured) and reads its metrics every poll interval; a failed scrape
// marks the engine down until one succeeds again.
func (e *Engine) Run(ctx context.Context, health func(error)) error {
	if e.rehash != nil {
		go func() {
			if err := e.rehash.Follow(ctx, *e.cfg.Events); err != nil && ctx.Err() == nil {
				e.log.Error("engine KV events", "err", err)
			}
		}()
	}
	t := time.NewTicker(e.cfg.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, max(e.cfg.PollInterval, 2*time.Second))
		l, err := e.c.Load(pctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil {
			e.setLoad(l)
		}
		switch was := e.healthy.Load(); {
		case err != nil && was:
			e.healthy.Store(false)
			e.log.Error("engine is down", "url", e.cfg.URL, "err", err)
			health(err)
		case err == nil && !was:
			e.healthy.Store(true)
			health(nil)
		}
	}
}

// Close implements engines.Engine.
func (e *Engine) Close() error { return nil }
