// Package sim is the mocker executor: it runs the engine's real scheduler,
// block manager and KV events, but instead of arithmetic each step just
// lasts what a timing model says (scaled by a speed-up factor) and every
// sampled token is a pseudo-random function of the request seed (or
// prompt) and position. Hundreds of simulated workers fit in one process,
// which is what router and planner tests need.
package sim

import (
	"context"
	"fmt"
	"math"
	"time"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/tokenizer"
)

// Config describes the simulated model and hardware.
type Config struct {
	Name       string // default "sim"
	VocabSize  int    // default 32000 (at least 259: byte tokenizer)
	ContextLen int    // default 8192
	// KVBytesPerToken makes the engine allocate a real arena (for transfer
	// tests); default 0, no KV memory.
	KVBytesPerToken int
	// SpeedUp divides every step time; 0 or +Inf means steps take no time
	// at all (overhead benchmarks).
	SpeedUp float64
	Timing  Timing // default Polynomial
	// Sleep waits d or until ctx is done; default a timer. Tests inject a
	// fake clock here.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Executor is the simulated executor.
type Executor struct {
	cfg Config
	tok tokenizer.Tokenizer
}

// New validates cfg and returns a simulator.
func New(cfg Config) (*Executor, error) {
	if cfg.Name == "" {
		cfg.Name = "sim"
	}
	if cfg.VocabSize == 0 {
		cfg.VocabSize = 32000
	}
	if cfg.ContextLen == 0 {
		cfg.ContextLen = 8192
	}
	if cfg.ContextLen < 0 || cfg.KVBytesPerToken < 0 || cfg.SpeedUp < 0 || math.IsNaN(cfg.SpeedUp) {
		return nil, fmt.Errorf("sim: invalid config %+v", cfg)
	}
	if cfg.Timing == nil {
		cfg.Timing = Polynomial{}
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	tok, err := tokenizer.NewBytes(cfg.VocabSize)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return &Executor{cfg: cfg, tok: tok}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Model implements executor.Executor. The simulator never emits its stop
// tokens, so generation ends on max tokens or stop strings.
func (e *Executor) Model() executor.Model {
	return executor.Model{
		Name: e.cfg.Name, VocabSize: e.cfg.VocabSize, ContextLen: e.cfg.ContextLen,
		BOS: tokenizer.BOS, EOS: tokenizer.EOS, StopTokens: []uint32{tokenizer.EOS},
		KVBytesPerToken: e.cfg.KVBytesPerToken,
	}
}

// Tokenizer implements executor.Executor.
func (e *Executor) Tokenizer() tokenizer.Tokenizer { return e.tok }

// Bind implements executor.Executor; the simulator ignores KV memory.
func (e *Executor) Bind(executor.KV) error { return nil }

// StepTime is how long b takes after the speed-up.
func (e *Executor) StepTime(b *executor.Batch) time.Duration {
	if e.cfg.SpeedUp == 0 || math.IsInf(e.cfg.SpeedUp, 1) {
		return 0
	}
	return time.Duration(float64(e.cfg.Timing.StepTime(b)) / e.cfg.SpeedUp)
}

// Execute implements executor.Executor.
func (e *Executor) Execute(ctx context.Context, b *executor.Batch) error {
	if d := e.StepTime(b); d > 0 {
		if err := e.cfg.Sleep(ctx, d); err != nil {
			return err
		}
	}
	for i := range b.Items {
		it := &b.Items[i]
		if it.Sample {
			it.Out = e.token(it.Seed, it.End)
		}
	}
	return nil
}

// token maps (seed, position) to an ordinary token (never BOS/EOS/UNK),
// preferring printable ASCII so decoded text stays readable.
func (e *Executor) token(seed uint64, pos int) uint32 {
	h := splitmix(seed ^ splitmix(uint64(pos)))
	if h%8 != 0 {
		return uint32(' '+h%95) + tokenizer.ByteOffset // printable byte
	}
	return tokenizer.ByteOffset + uint32((h>>8)%uint64(e.cfg.VocabSize-int(tokenizer.ByteOffset)))
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
