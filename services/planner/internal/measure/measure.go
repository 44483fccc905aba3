// Package measure is `planner profile`: it measures one worker (sim or
// llama, whatever serves) the way the planner's throughput model reads
// it, and writes a profile (internal/profile). A prefill point is the
// time to the first token of one prompt alone, of fresh tokens (no prefix
// cache hit), the median of a few tries; a decode point is the median gap
// between tokens while a batch of sequences of one context length decodes
// together, counted once every sequence has its first token (so the
// batch's own prefills are left out).
//
// It talks to the worker directly (WorkerService.Generate), not through
// the frontend, so nothing but the engine is measured, and the worker
// must be otherwise idle.
package measure

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"

	"switchyard.dev/services/planner/internal/profile"
)

// Config is a measurement.
type Config struct {
	// Worker is the worker's base URL (http://host:port).
	Worker string
	// Inputs are the prompt lengths of the prefill points; Batches and
	// Contexts the grid of decode points. Empty: spread over the model's
	// context (see defaults).
	Inputs, Batches, Contexts []int
	// Tries per prefill point (default 3); Tokens generated per decode
	// sequence (default 32).
	Tries, Tokens int
	Executor      string // recorded in the profile ("sim", "llama")
	Client        *http.Client
	Log           io.Writer // progress, one line a point; nil: none
}

// Run measures the worker and returns its profile.
func Run(ctx context.Context, cfg Config) (*profile.Profile, error) {
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	if cfg.Tries <= 0 {
		cfg.Tries = 3
	}
	if cfg.Tokens <= 1 {
		cfg.Tokens = 32
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	w := workerv1connect.NewWorkerServiceClient(cfg.Client, cfg.Worker)
	info, err := w.GetModelInfo(ctx, connect.NewRequest(&workerv1.GetModelInfoRequest{}))
	if err != nil {
		return nil, fmt.Errorf("measure: worker %s: %w", cfg.Worker, err)
	}
	load, err := w.GetLoad(ctx, connect.NewRequest(&workerv1.GetLoadRequest{}))
	if err != nil {
		return nil, fmt.Errorf("measure: worker %s: %w", cfg.Worker, err)
	}
	mi, ctxLen := info.Msg, int(info.Msg.GetContextLength())
	if mi.GetVocabSize() < 16 || ctxLen < 64 {
		return nil, fmt.Errorf("measure: worker %s serves %q with a vocabulary of %d and a context of %d: too small to measure", cfg.Worker, mi.GetModel(), mi.GetVocabSize(), ctxLen)
	}
	defaults(&cfg, ctxLen)
	m := &meter{w: w, model: mi.GetModel(), vocab: int(mi.GetVocabSize()), rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))}
	p := &profile.Profile{Version: profile.Version, Model: mi.GetModel(), Executor: cfg.Executor, BlockSize: int(mi.GetBlockSize()),
		KVBlocks: int(load.Msg.GetKvBlocksTotal()), MeasuredAt: time.Now().UTC()}
	for _, n := range cfg.Inputs {
		var ts []float64
		for range cfg.Tries {
			d, err := m.prefill(ctx, n)
			if err != nil {
				return nil, err
			}
			ts = append(ts, d.Seconds())
		}
		s := median(ts)
		fmt.Fprintf(cfg.Log, "prefill %6d tokens: %8.2f ms\n", n, s*1e3)
		p.Prefill = append(p.Prefill, profile.PrefillPoint{InputTokens: n, Seconds: s})
	}
	for _, c := range cfg.Contexts {
		for _, b := range cfg.Batches {
			if p.KVBlocks > 0 && p.BlockSize > 0 && b*((c+cfg.Tokens)/p.BlockSize+2) > p.KVBlocks {
				continue // the batch does not fit the worker's KV pool
			}
			itl, err := m.decode(ctx, b, c, cfg.Tokens)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(cfg.Log, "decode batch %3d context %6d: %8.2f ms a token\n", b, c, itl*1e3)
			p.Decode = append(p.Decode, profile.DecodePoint{Batch: b, ContextTokens: c, ITLSeconds: itl})
		}
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("measure: %w", err)
	}
	return p, nil
}

// defaults spreads unset points over the context: prompts from 64 tokens
// doubling to half the context, batches 1 to 64, contexts an eighth and
// a half of it.
func defaults(cfg *Config, ctxLen int) {
	limit := ctxLen - cfg.Tokens - 2
	if len(cfg.Inputs) == 0 {
		for n := 64; n <= ctxLen/2; n *= 2 {
			cfg.Inputs = append(cfg.Inputs, n)
		}
	}
	if len(cfg.Batches) == 0 {
		cfg.Batches = []int{1, 2, 4, 8, 16, 32, 64}
	}
	if len(cfg.Contexts) == 0 {
		cfg.Contexts = []int{max(ctxLen/8, 16), ctxLen / 2}
	}
	cfg.Inputs = slices.DeleteFunc(cfg.Inputs, func(n int) bool { return n <= 0 || n > limit })
	cfg.Contexts = slices.DeleteFunc(cfg.Contexts, func(n int) bool { return n <= 0 || n > limit })
	sort.Ints(cfg.Inputs)
	sort.Ints(cfg.Contexts)
	sort.Ints(cfg.Batches)
}

type meter struct {
	w     workerv1connect.WorkerServiceClient
	model string
	vocab int
	mu    sync.Mutex
	rng   *rand.Rand
	n     int
}

// prompt is n fresh tokens: no prefix of it is cached anywhere.
func (m *meter) prompt(n int) []uint32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]uint32, n)
	lo := min(3, m.vocab-1)
	for i := range out {
		out[i] = uint32(lo + m.rng.IntN(m.vocab-lo))
	}
	return out
}

func (m *meter) id() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.n++
	return fmt.Sprintf("planner-profile-%d", m.n)
}

// stream runs one generation and returns each token's arrival time.
func (m *meter) stream(ctx context.Context, prompt []uint32, tokens int) ([]time.Time, error) {
	s, err := m.w.Generate(ctx, connect.NewRequest(&workerv1.GenerateRequest{RequestId: m.id(), Model: m.model, TokenIds: prompt,
		Sampling: &commonv1.SamplingParams{Temperature: 0}, Stop: &commonv1.StopConditions{MaxTokens: uint32(tokens), IgnoreEos: true}}))
	if err != nil {
		return nil, fmt.Errorf("measure: generate: %w", err)
	}
	defer s.Close()
	var at []time.Time
	for s.Receive() {
		now := time.Now()
		for range s.Msg().GetTokenIds() {
			at = append(at, now)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("measure: generate: %w", err)
	}
	if len(at) == 0 {
		return nil, errors.New("measure: the worker generated nothing")
	}
	return at, nil
}

func (m *meter) prefill(ctx context.Context, n int) (time.Duration, error) {
	start := time.Now()
	at, err := m.stream(ctx, m.prompt(n), 1)
	if err != nil {
		return 0, err
	}
	return at[0].Sub(start), nil
}

// decode runs b sequences of c-token prompts together and returns the
// median gap between tokens once all have their first.
func (m *meter) decode(ctx context.Context, b, c, tokens int) (float64, error) {
	times := make([][]time.Time, b)
	errs := make([]error, b)
	var wg sync.WaitGroup
	for i := range b {
		p := m.prompt(c)
		wg.Go(func() { times[i], errs[i] = m.stream(ctx, p, tokens) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	var t0 time.Time
	for _, at := range times {
		if at[0].After(t0) {
			t0 = at[0]
		}
	}
	var gaps []float64
	for _, at := range times {
		for i := 1; i < len(at); i++ {
			if at[i-1].Before(t0) {
				continue
			}
			if g := at[i].Sub(at[i-1]).Seconds(); g > 0 {
				gaps = append(gaps, g)
			}
		}
	}
	if len(gaps) == 0 {
		return 0, fmt.Errorf("measure: batch %d context %d: no token gaps after every sequence started (raise the tokens)", b, c)
	}
	return median(gaps), nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
