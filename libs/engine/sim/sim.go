// Package sim is the mocker executor: it runs the engine's real scheduler,
// block manager and KV events, but instead of arithmetic each step just
// lasts what a timing model says (scaled by a speed-up factor) and every
// sampled token is a pseudo-random function of the request seed (or
// prompt) and position. Hundreds of simulated workers fit in one process,
// which is what router and planner tests need.
package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
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
	// Sleep waits d or until ctx is done; default a timer. Now reads the
	// clock; default time.Now. Tests inject a fake clock here (both or
	// neither).
	Sleep func(ctx context.Context, d time.Duration) error
	Now   func() time.Time
}

// maxCarryGap bounds the time between one step's end and the next step's
// start (the engine's own work: completing, planning) across which the
// first step's oversleep is still owed. A longer gap means the engine
// waited for work, so the simulated device idled and the oversleep is moot.
const maxCarryGap = 2 * time.Millisecond

// Executor is the simulated executor.
//
// Steps keep to the timing model's clock, not the host's: a timer fires
// late (on Linux by up to a millisecond, more on a busy host), which would
// stretch a 1.6 ms decode step by 40% and make the simulated device slower
// than its model. Each step's oversleep is taken off the next step's sleep
// when the engine went straight from one to the other, so a run of steps
// lasts what the model says plus the engine's own work between them.
type Executor struct {
	cfg Config
	tok tokenizer.Tokenizer

	mu   sync.Mutex // guards late and woke: the clock of back-to-back steps
	late time.Duration
	woke time.Time
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
	if (cfg.Sleep == nil) != (cfg.Now == nil) {
		return nil, errors.New("sim: Sleep and Now come together (a fake clock needs both)")
	}
	if cfg.Sleep == nil {
		cfg.Sleep, cfg.Now = sleep, time.Now
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
		if err := e.sleepStep(ctx, d); err != nil {
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

// sleepStep waits out a step of modelled length d, less what the previous
// step overslept if this one follows it directly, and records this step's
// own oversleep. A step that ends early (cancelled) leaves nothing owed.
func (e *Executor) sleepStep(ctx context.Context, d time.Duration) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	start := e.cfg.Now()
	owed := time.Duration(0)
	if !e.woke.IsZero() && start.Sub(e.woke) <= maxCarryGap {
		owed = e.late
	}
	wait := d - owed
	if wait > 0 {
		if err := e.cfg.Sleep(ctx, wait); err != nil {
			e.late, e.woke = 0, time.Time{}
			return err
		}
	}
	e.woke = e.cfg.Now()
	// What the model and the clock disagree on so far: this step's
	// oversleep, or the part of the debt a short step could not repay.
	e.late = max(e.woke.Sub(start)-max(wait, 0), 0) + max(owed-d, 0)
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
