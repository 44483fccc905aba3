package mooncake

import "fmt"

// Synth turns hash ids into prompt token ids.
//
// Each hash id expands to ReplayBlockTokens pseudo-random ids in
// [TokenMin, Vocab), a pure function of (Seed, id, position): equal ids give
// equal blocks, so requests that share leading hash ids share a token prefix
// and exercise the server's prefix cache exactly as the trace intends.
//
// ReplayBlockTokens may be smaller than the trace's BlockTokens so a tiny
// model with a short context can replay a trace: input lengths are then scaled
// by ReplayBlockTokens/BlockTokens.
type Synth struct {
	Vocab             int
	TokenMin          int
	BlockTokens       int
	ReplayBlockTokens int
	Seed              uint64
}

// Validate reports a setting that cannot produce tokens.
func (s Synth) Validate() error {
	switch {
	case s.Vocab < 2:
		return fmt.Errorf("vocab %d: must be at least 2", s.Vocab)
	case s.TokenMin < 0 || s.TokenMin >= s.Vocab:
		return fmt.Errorf("token-min %d: must be in [0, vocab %d)", s.TokenMin, s.Vocab)
	case s.BlockTokens < 1:
		return fmt.Errorf("block-tokens %d: must be >= 1", s.BlockTokens)
	case s.ReplayBlockTokens < 1 || s.ReplayBlockTokens > s.BlockTokens:
		return fmt.Errorf("trace-block-tokens %d: must be in [1, block-tokens %d]", s.ReplayBlockTokens, s.BlockTokens)
	}
	return nil
}

// InputLen is the replayed prompt length of r: input_length scaled by
// ReplayBlockTokens/BlockTokens (rounded up, so no request becomes empty) and
// never more than the blocks listed.
func (s Synth) InputLen(r Record) int {
	n := (r.InputLength*s.ReplayBlockTokens + s.BlockTokens - 1) / s.BlockTokens
	return max(1, min(n, len(r.HashIDs)*s.ReplayBlockTokens))
}

// Tokens appends the prompt of r to dst, truncated to limit tokens when limit
// is positive and smaller than InputLen.
func (s Synth) Tokens(dst []int, r Record, limit int) []int {
	n := s.InputLen(r)
	if limit > 0 {
		n = min(n, limit)
	}
	for _, id := range r.HashIDs {
		if n <= 0 {
			break
		}
		take := min(n, s.ReplayBlockTokens)
		dst = s.block(dst, id, take)
		n -= take
	}
	return dst
}

// Block appends the first n tokens of hash id's block to dst.
func (s Synth) Block(dst []int, id int64, n int) []int {
	return s.block(dst, id, min(n, s.ReplayBlockTokens))
}

func (s Synth) block(dst []int, id int64, n int) []int {
	span := uint64(s.Vocab - s.TokenMin)
	state := Mix64(s.Seed ^ Mix64(uint64(id)+0x632be59bd9b4e019))
	for range n {
		state += 0x9e3779b97f4a7c15
		dst = append(dst, s.TokenMin+int(Mix64(state)%span))
	}
	return dst
}

// Mix64 is the splitmix64 finalizer: a cheap bijective scramble of z. Token
// ids derived from it are a pure function of their inputs, the same in every
// run and process, which is what lets prompts share prefixes on purpose; the
// synthetic workload uses it too for its shared prefixes.
func Mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
