package sample

import (
	"fmt"
	"math"
)

// A Constraint restricts which tokens may come next (structured output).
type Constraint interface {
	// Mask sets to -Inf the logits of tokens that may not come next;
	// left is how many tokens may still be generated after this one.
	Mask(logits []float32, left int)
	// Accept advances past an emitted token.
	Accept(tok uint32) error
}

// Constrain makes every later Sample draw only tokens c allows; budget is
// the most tokens this sampler will emit (the request's max tokens, or
// fewer when the context runs out first), so that c can steer to a
// complete output in time. Call it before the first Sample.
func (s *Sampler) Constrain(c Constraint, budget int) { s.c, s.budget = c, budget }

// Accept records tok as emitted: the engine calls it once for every token
// it emits, the one it emits in place of the draw included (a
// disaggregated prefill's first token), and never for a recomputed
// prefix. It counts tok for the penalties and advances the constraint,
// whose refusal it returns (a token the mask would have removed).
func (s *Sampler) Accept(tok uint32) error {
	s.accepted++
	if s.p.PresencePenalty != 0 || s.p.FrequencyPenalty != 0 {
		if s.counts == nil {
			s.counts = make(map[uint32]int32)
		}
		s.counts[tok]++
	}
	if s.c != nil {
		if err := s.c.Accept(tok); err != nil {
			return fmt.Errorf("output token %d refused by the constraint: %w", tok, err)
		}
	}
	return nil
}

// adjust returns the logits the draw is from, before the constraint's
// mask, in s.scratch: logits[t] + LogitBias[t], then, for each token t
// this completion emitted c times, minus c*FrequencyPenalty and minus
// PresencePenalty (in that order, in float32, as vLLM does). It returns
// nil when nothing changes the logits and there is no constraint, so the
// common case neither copies nor allocates.
func (s *Sampler) adjust(logits []float32) []float32 {
	if len(s.p.LogitBias) == 0 && len(s.counts) == 0 && s.c == nil {
		return nil
	}
	if cap(s.scratch) < len(logits) {
		s.scratch = make([]float32, len(logits))
	}
	x := s.scratch[:len(logits)]
	copy(x, logits)
	for t, b := range s.p.LogitBias {
		if int(t) < len(x) {
			x[t] += b
		}
	}
	for t, c := range s.counts { // each entry touches its own token: order does not matter
		if int(t) < len(x) {
			x[t] -= float32(c) * s.p.FrequencyPenalty
			x[t] -= s.p.PresencePenalty
		}
	}
	return x
}

// drawAdjusted draws from x, the adjusted logits of raw, after the
// constraint masks it. When the mask leaves no token (a constraint that
// cannot continue, or a budget too small to finish in), it returns the
// best token of the unmasked adjusted logits without drawing: Accept
// then reports the constraint's refusal, which ends the request.
func (s *Sampler) drawAdjusted(x, raw []float32) uint32 {
	if s.c == nil {
		return s.draw(x, Argmax(x))
	}
	s.c.Mask(x, max(s.budget-s.accepted-1, 0))
	am := Argmax(x)
	if len(x) > 0 && !(x[am] > float32(math.Inf(-1))) { // every token masked (or NaN)
		return Argmax(s.adjust(raw))
	}
	return s.draw(x, am)
}
