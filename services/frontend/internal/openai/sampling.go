package openai

import (
	"fmt"
	"slices"
	"strconv"
)

// Limits on the sampling fields beyond OpenAI's ranges.
const (
	// MaxPenalty bounds presence_penalty and frequency_penalty, as
	// OpenAI does.
	MaxPenalty = 2
	// MaxBias bounds a logit_bias value, as OpenAI does.
	MaxBias = 100
	// MaxLogitBias caps logit_bias's entries: each is applied to the
	// logits at every step of the generation.
	MaxLogitBias = 1024
	// MaxN caps n: each choice is a generation of its own.
	MaxN = 8
)

// checkPenalties checks presence_penalty and frequency_penalty.
func (p *Params) checkPenalties(g *Generation) error {
	for _, f := range []struct {
		name string
		v    *float64
		out  *float32
	}{{"presence_penalty", p.PresencePenalty, &g.PresencePenalty}, {"frequency_penalty", p.FrequencyPenalty, &g.FrequencyPenalty}} {
		if f.v == nil {
			continue
		}
		if !(*f.v >= -MaxPenalty && *f.v <= MaxPenalty) {
			return Invalid(f.name, "%s must be in [-%d, %d], got %v.", f.name, MaxPenalty, MaxPenalty, *f.v)
		}
		*f.out = float32(*f.v)
	}
	return nil
}

// checkLogitBias checks logit_bias: at most MaxLogitBias token ids,
// written in decimal, each to a bias in [-100, 100]. Errors name the
// lowest offending key, so they do not depend on the map's order. Ids are
// checked against the vocabulary once the model is known.
func (p *Params) checkLogitBias(g *Generation) error {
	if len(p.LogitBias) == 0 {
		return nil
	}
	if len(p.LogitBias) > MaxLogitBias {
		return Invalid("logit_bias", "logit_bias has %d entries; at most %d are allowed.", len(p.LogitBias), MaxLogitBias)
	}
	keys := make([]string, 0, len(p.LogitBias))
	for k := range p.LogitBias {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	g.LogitBias = make(map[uint32]float32, len(keys))
	for _, k := range keys {
		id, err := strconv.ParseUint(k, 10, 32)
		if err != nil || strconv.FormatUint(id, 10) != k {
			return Invalid("logit_bias", "logit_bias keys must be token ids in decimal, such as \"1234\"; got %q.", k)
		}
		v := p.LogitBias[k]
		if !(v >= -MaxBias && v <= MaxBias) {
			return Invalid("logit_bias", "logit_bias[%q] must be in [-%d, %d], got %v.", k, MaxBias, MaxBias, v)
		}
		g.LogitBias[uint32(id)] = float32(v)
	}
	return nil
}

// checkN checks n.
func (p *Params) checkN(g *Generation) error {
	g.N = 1
	if p.N == nil {
		return nil
	}
	if *p.N < 1 || *p.N > MaxN {
		return Invalid("n", "n must be in [1, %d], got %d.", MaxN, *p.N)
	}
	g.N = int(*p.N)
	return nil
}

// checkBestOf checks best_of: this server returns every choice it
// generates, so best_of may only be n (absent, or n itself).
func checkBestOf(bestOf *int64, n int) error {
	if bestOf == nil || *bestOf == int64(n) {
		return nil
	}
	return Unsupported("best_of", fmt.Sprintf("best_of must be absent or equal to n (%d), got %d: every generated choice is returned.", n, *bestOf))
}

// SeedFor is the seed of choice i of a request seeded with seed: seed+i,
// so each choice is reproducible on its own and differs from the others.
// Without a seed it is nil (each worker draws one).
func SeedFor(seed *uint64, i int) *uint64 {
	if seed == nil {
		return nil
	}
	s := *seed + uint64(i)
	return &s
}
