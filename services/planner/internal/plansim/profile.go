package plansim

import (
	"fmt"
	"time"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/sched"

	"switchyard.dev/services/planner/internal/profile"
)

// MeasureProfile measures a replica of cfg as `planner profile` measures
// a live worker, on the virtual clock: the time to first token of one
// prompt alone, per input length, and the mean step time while a batch of
// sequences of one context length decodes together.
func MeasureProfile(cfg Config, inputs, batches, contexts []int) (*profile.Profile, error) {
	if cfg.Timing == nil {
		return nil, fmt.Errorf("plansim: no timing")
	}
	p := &profile.Profile{Version: profile.Version, Model: "sim", Executor: "sim", MeasuredAt: time.Now().UTC()}
	newCore := func() (*engine.Core, error) {
		return engine.NewCore(cfg.Engine, executor.Model{Name: "sim", ContextLen: cfg.ContextLen})
	}
	for _, n := range inputs {
		core, err := newCore()
		if err != nil {
			return nil, fmt.Errorf("plansim: %w", err)
		}
		p.BlockSize, p.KVBlocks = core.KV.BlockSize(), core.KV.NumBlocks()
		if n >= core.MaxLen {
			_ = core.KV.Close()
			continue
		}
		ttft, _ := drive(cfg, core, []*sched.Seq{seq(1, n)}, 1)
		_ = core.KV.Close()
		p.Prefill = append(p.Prefill, profile.PrefillPoint{InputTokens: n, Seconds: ttft.Seconds()})
	}
	for _, c := range contexts {
		for _, b := range batches {
			core, err := newCore()
			if err != nil {
				return nil, fmt.Errorf("plansim: %w", err)
			}
			if b*(c+64) > core.KV.NumBlocks()*core.KV.BlockSize() || c+64 >= core.MaxLen {
				_ = core.KV.Close()
				continue
			}
			seqs := make([]*sched.Seq, b)
			for i := range seqs {
				seqs[i] = seq(uint64(i+1), c)
			}
			_, itl := drive(cfg, core, seqs, 32)
			_ = core.KV.Close()
			p.Decode = append(p.Decode, profile.DecodePoint{Batch: b, ContextTokens: c, ITLSeconds: itl.Seconds()})
		}
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("plansim: measured profile: %w", err)
	}
	return p, nil
}

// seq is a prompt of n tokens no other seq shares.
func seq(id uint64, n int) *sched.Seq {
	toks := make([]uint32, n)
	for i := range toks {
		toks[i] = 300 + uint32((id*7919+uint64(i)*104729)%30000)
	}
	return &sched.Seq{ID: id, Tokens: toks, PromptLen: n}
}

// drive runs seqs to out tokens each and returns the time to the last
// first token and the mean step time once every seq decodes.
func drive(cfg Config, core *engine.Core, seqs []*sched.Seq, out int) (ttft, itl time.Duration) {
	for _, q := range seqs {
		core.Sched.Add(q)
	}
	gen := map[uint64]int{}
	var now, decodeTime time.Duration
	decodeSteps := 0
	for core.Sched.Waiting()+core.Sched.Running() > 0 {
		p := core.Sched.Schedule()
		if len(p.Items) == 0 {
			break
		}
		var b executor.Batch
		engine.StepStats(&b, p, core.KV)
		d := cfg.Timing.StepTime(&b)
		now += d
		if p.PrefillTokens == 0 && len(gen) == len(seqs) {
			decodeTime += d
			decodeSteps++
		}
		sampled := make([]uint32, len(p.Items))
		for i := range sampled {
			sampled[i] = 301
		}
		core.Sched.Complete(p, sampled)
		for _, it := range p.Items {
			if !it.Sample || !it.Seq.Running() {
				continue
			}
			if gen[it.Seq.ID]++; gen[it.Seq.ID] == 1 {
				ttft = now
			}
			if gen[it.Seq.ID] >= out {
				core.Sched.Finish(it.Seq)
			}
		}
	}
	if decodeSteps > 0 {
		itl = decodeTime / time.Duration(decodeSteps)
	}
	return ttft, itl
}
