// Package sample picks the next token from logits: greedy, temperature,
// top-k and top-p, with a per-request seeded generator so that a seeded
// sampled run is reproducible no matter how requests are batched or
// preempted (recomputed prefixes never draw from the generator).
//
// Before the draw, logit_bias, presence and frequency penalties and an
// output Constraint may adjust the logits (process.go). Their state, the
// counts of emitted tokens and the constraint's position, advances only
// in Accept, which the engine calls once per emitted token, never while
// it recomputes a preempted prefix; so it too is independent of batching
// and preemption.
package sample

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"switchyard.dev/libs/engine/internal/fastexp"
)

// ErrInvalid is wrapped by every invalid-parameter error.
var ErrInvalid = errors.New("invalid sampling parameters")

// Params are the sampling knobs of one request.
type Params struct {
	// Temperature 0 means greedy (argmax, first index on ties).
	Temperature float32
	// TopP keeps the smallest set of tokens whose probability reaches TopP;
	// 0 or 1 disables it.
	TopP float32
	// TopK keeps the K most likely tokens; 0 disables it.
	TopK int
	// Seed makes sampling reproducible; nil lets the engine pick one.
	Seed *uint64
	// Logprobs records each sampled position's Logprob (TakeLogprob).
	Logprobs bool
	// TopLogprobs is how many of the most likely tokens a Logprob lists,
	// at most MaxTopLogprobs; it needs Logprobs.
	TopLogprobs int
	// PresencePenalty is subtracted from the logit of every token this
	// completion has emitted (not the prompt's), once; FrequencyPenalty,
	// times how often it was emitted. Both in [-MaxPenalty, MaxPenalty]
	// (OpenAI's presence_penalty and frequency_penalty).
	PresencePenalty, FrequencyPenalty float32
	// LogitBias is added to the logits of its token ids before the
	// penalties, each in [-MaxLogitBias, MaxLogitBias]. The sampler does
	// not know the vocabulary: the engine checks the ids (an id beyond
	// the logits is ignored here).
	LogitBias map[uint32]float32
	// Format restricts the output to a language (structured output). The
	// sampler only carries it: the engine compiles it into the Constraint
	// it passes to Sampler.Constrain.
	Format Format
}

// Format is a request's structured-output format; the zero value is free
// text. At most one field may be set.
type Format struct {
	// JSONObject asks for any JSON object (OpenAI's json_object).
	JSONObject bool
	// JSONSchema asks for a JSON value valid against this JSON Schema
	// document.
	JSONSchema string
}

// IsZero reports whether f is free text.
func (f Format) IsZero() bool { return f == Format{} }

// Bounds on Params (OpenAI's limits).
const (
	MaxTopLogprobs = 20
	MaxPenalty     = 2
	MaxLogitBias   = 100
)

// Validate reports whether p is usable.
func (p Params) Validate() error {
	switch {
	case math.IsNaN(float64(p.Temperature)) || p.Temperature < 0 || math.IsInf(float64(p.Temperature), 0):
		return fmt.Errorf("%w: temperature %v must be finite and >= 0", ErrInvalid, p.Temperature)
	case math.IsNaN(float64(p.TopP)) || p.TopP < 0 || p.TopP > 1:
		return fmt.Errorf("%w: top_p %v must be in [0, 1]", ErrInvalid, p.TopP)
	case p.TopK < 0:
		return fmt.Errorf("%w: top_k %d must be >= 0", ErrInvalid, p.TopK)
	case p.TopLogprobs < 0 || p.TopLogprobs > MaxTopLogprobs:
		return fmt.Errorf("%w: top_logprobs %d must be in [0, %d]", ErrInvalid, p.TopLogprobs, MaxTopLogprobs)
	case p.TopLogprobs > 0 && !p.Logprobs:
		return fmt.Errorf("%w: top_logprobs %d needs logprobs", ErrInvalid, p.TopLogprobs)
	case !within(p.PresencePenalty, MaxPenalty):
		return fmt.Errorf("%w: presence_penalty %v must be in [-%d, %d]", ErrInvalid, p.PresencePenalty, MaxPenalty, MaxPenalty)
	case !within(p.FrequencyPenalty, MaxPenalty):
		return fmt.Errorf("%w: frequency_penalty %v must be in [-%d, %d]", ErrInvalid, p.FrequencyPenalty, MaxPenalty, MaxPenalty)
	case p.Format.JSONObject && p.Format.JSONSchema != "":
		return fmt.Errorf("%w: a format is a JSON object or a JSON schema, not both", ErrInvalid)
	}
	// The lowest bad id, so that the message does not depend on the
	// map's order.
	bad, found := uint32(0), false
	for t, b := range p.LogitBias {
		if !within(b, MaxLogitBias) && (!found || t < bad) {
			bad, found = t, true
		}
	}
	if found {
		return fmt.Errorf("%w: logit_bias %v for token %d must be in [-%d, %d]", ErrInvalid, p.LogitBias[bad], bad, MaxLogitBias, MaxLogitBias)
	}
	return nil
}

// within reports whether v is in [-limit, limit] (so neither NaN nor
// infinite).
func within(v float32, limit float32) bool { return v >= -limit && v <= limit }

// NeedsLogits reports whether p asks for anything an executor that does
// not compute logits (a timing simulation) cannot give: logprobs,
// penalties, a bias or a format.
func (p Params) NeedsLogits() bool {
	return p.Logprobs || p.PresencePenalty != 0 || p.FrequencyPenalty != 0 || len(p.LogitBias) > 0 || !p.Format.IsZero()
}

// Greedy reports whether p always picks the argmax.
func (p Params) Greedy() bool { return p.Temperature == 0 || p.TopK == 1 }

// Sampler draws tokens for one request. It is not safe for concurrent use;
// the engine gives each sequence its own.
type Sampler struct {
	p     Params
	rng   *rand.Rand
	probs []float32
	idx   []int32

	force    *uint32 // see Force
	last     Logprob // with Params.Logprobs: the last sampled position's
	recorded bool

	// Logit processing (process.go).
	scratch  []float32        // the adjusted logits; the caller's are not written
	counts   map[uint32]int32 // with penalties: times each token was accepted
	c        Constraint       // nil without one
	budget   int              // tokens this sampler emits at most (Constrain)
	accepted int              // tokens accepted so far
}

// TokenLogprob is a token and its log probability.
type TokenLogprob struct {
	Token   uint32
	Logprob float32
}

// Logprob describes one sampled position under the model's own
// distribution, the softmax of the raw logits (before temperature, top-k
// and top-p, as vLLM reports by default): the natural log of the emitted
// token's probability, and the Params.TopLogprobs most likely tokens, most
// likely first (ties: lower id first).
type Logprob struct {
	Logprob float32
	Top     []TokenLogprob
}

// Force makes the next Sample record the Logprob of tok instead of the
// token it draws: the token a disaggregated prefill worker already chose.
// The draw still happens, so a seeded generator stays in step.
func (s *Sampler) Force(tok uint32) { s.force = &tok }

// TakeLogprob returns the Logprob the last Sample recorded, once; false
// when none was recorded since (Params.Logprobs unset, or no Sample).
func (s *Sampler) TakeLogprob() (Logprob, bool) {
	lp, ok := s.last, s.recorded
	s.last, s.recorded = Logprob{}, false
	return lp, ok
}

// record computes the Logprob of tok under logits, whose largest entry is
// at am. The log-sum-exp is
// accumulated in float64 in a fixed order, so equal logits give equal
// results however the step was batched. Terms below e^-100 of the largest
// are left out: even a million of them change the sum by less than 1e-37.
func (s *Sampler) record(logits []float32, am, tok uint32) {
	maxv := float64(logits[am])
	var sums [4]float64 // four chains, for the FPU's pipelines
	i := 0
	for ; i+4 <= len(logits); i += 4 {
		for j := range 4 {
			if d := float64(logits[i+j]) - maxv; d > -100 {
				sums[j] += fastexp.Exp(d)
			}
		}
	}
	for ; i < len(logits); i++ {
		if d := float64(logits[i]) - maxv; d > -100 {
			sums[0] += fastexp.Exp(d)
		}
	}
	lse := maxv + math.Log((sums[0]+sums[1])+(sums[2]+sums[3]))
	lp := Logprob{Logprob: float32(float64(logits[tok]) - lse)}
	if n := min(s.p.TopLogprobs, len(logits)); n > 0 {
		lp.Top = make([]TokenLogprob, 0, n)
		for i, v := range logits { // insertion into the n best so far
			if len(lp.Top) == n && v <= logits[lp.Top[n-1].Token] {
				continue
			}
			j := len(lp.Top)
			if j < n {
				lp.Top = append(lp.Top, TokenLogprob{})
			} else {
				j = n - 1
			}
			for ; j > 0 && v > logits[lp.Top[j-1].Token]; j-- {
				lp.Top[j] = lp.Top[j-1]
			}
			lp.Top[j] = TokenLogprob{Token: uint32(i)}
		}
		for k := range lp.Top {
			lp.Top[k].Logprob = float32(float64(logits[lp.Top[k].Token]) - lse)
		}
	}
	s.last, s.recorded = lp, true
}

// New returns a sampler for p whose generator is seeded with seed.
func New(p Params, seed uint64) *Sampler {
	return &Sampler{p: p, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Argmax returns the index of the largest logit (the first on ties).
func Argmax(logits []float32) uint32 {
	best, bi := float32(math.Inf(-1)), 0
	for i, v := range logits {
		if v > best {
			best, bi = v, i
		}
	}
	return uint32(bi)
}

// Sample picks a token from logits (which it does not modify), recording
// its Logprob when Params.Logprobs is set. The draw is from the logits
// after the bias, the penalties and the constraint's mask (process.go);
// the Logprob is from the raw ones, as vLLM reports by default. Without
// bias, penalties to apply or a constraint the logits are not copied.
func (s *Sampler) Sample(logits []float32) uint32 {
	var am, tok uint32
	if x := s.adjust(logits); x != nil {
		tok = s.drawAdjusted(x, logits)
		if s.p.Logprobs {
			am = Argmax(logits)
		}
	} else {
		am = Argmax(logits) // the draw and the record both start from it
		tok = s.draw(logits, am)
	}
	if s.p.Logprobs && len(logits) > 0 {
		rec := tok
		if s.force != nil && int(*s.force) < len(logits) {
			rec = *s.force
		}
		s.record(logits, am, rec)
	}
	s.force = nil
	return tok
}

// draw picks a token from logits, whose largest entry is at am.
func (s *Sampler) draw(logits []float32, am uint32) uint32 {
	if s.p.Greedy() || len(logits) == 0 {
		return am
	}
	probs := s.softmax(logits, logits[am])
	idx := s.candidates(probs, am)
	if len(idx) == 0 { // every probability NaN: logits the model should never give
		return am
	}
	if k := s.p.TopK; k > 0 && k < len(idx) {
		idx = idx[:k]
	}
	if p := s.p.TopP; p > 0 && p < 1 {
		var cum float32
		for i, j := range idx {
			cum += probs[j]
			if cum >= p {
				idx = idx[:i+1]
				break
			}
		}
	}
	var total float32
	for _, j := range idx {
		total += probs[j]
	}
	r := float32(s.rng.Float64()) * total
	var cum float32
	for _, j := range idx {
		cum += probs[j]
		if r < cum {
			return uint32(j)
		}
	}
	// r rounded up to the total: the last candidate that can be drawn, not
	// a zero-probability one (a token a constraint masked).
	i := len(idx) - 1
	for i > 0 && probs[idx[i]] == 0 {
		i--
	}
	return uint32(idx[i])
}

func (s *Sampler) softmax(logits []float32, maxv float32) []float32 {
	s.probs = slices.Grow(s.probs[:0], len(logits))[:len(logits)]
	var sum float32
	for i, v := range logits {
		e := float32(math.Exp(float64((v - maxv) / s.p.Temperature)))
		s.probs[i] = e
		sum += e
	}
	for i := range s.probs {
		s.probs[i] /= sum
	}
	return s.probs
}

// candidates returns token indices sorted by probability (descending, ties
// by index). With top-p alone, tokens below (1-p)/(n-1) are dropped before
// sorting, as llama2.c does, except the most likely token am: when p is
// below 1/n every token can be below that bound (a flat distribution), yet
// the nucleus always holds the most likely one (an empty list crashed the
// engine's loop).
func (s *Sampler) candidates(probs []float32, am uint32) []int32 {
	s.idx = s.idx[:0]
	cutoff := float32(0)
	if s.p.TopK == 0 && s.p.TopP > 0 && s.p.TopP < 1 && len(probs) > 1 {
		cutoff = (1 - s.p.TopP) / float32(len(probs)-1)
	}
	for i, p := range probs {
		if p >= cutoff || i == int(am) {
			s.idx = append(s.idx, int32(i))
		}
	}
	slices.SortFunc(s.idx, func(a, b int32) int {
		switch {
		case probs[a] > probs[b]:
			return -1
		case probs[a] < probs[b]:
			return 1
		}
		return int(a - b)
	})
	return s.idx
}
