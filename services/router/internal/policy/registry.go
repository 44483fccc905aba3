package policy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
)

// Params configure plugins when a profile is built.
type Params struct {
	Weights          TierWeights
	PrefillLoadScale float64
	// OwnPrefillWeight weighs the request's own uncached blocks against the
	// prefill already queued on a worker (values below 1 count as 1). Above
	// 1 it charges a recompute for the delay it adds to every request
	// queued behind it there, not only for the request's own TTFT.
	OwnPrefillWeight float64
	Temperature      float64
	// PrefixPullWeight is the overlap credit of a block the worker would
	// copy from a peer (Candidate.PeerDepth) rather than compute; 0 turns
	// prefix pull off.
	PrefixPullWeight float64
}

// DefaultPrefillLoadScale weighs a block to prefill 128 times a block held
// by a running sequence. Prefilling a block costs its compute at once, in
// the TTFT of everything queued behind it; a held block only makes each
// decode step read a little more KV, and a decode ends on its own. So held
// blocks are little more than a tie-break between workers with the same
// prefill queue. With routesim on the Mooncake traces at 8 workers, kv
// mean TTFT at 128 against 16: conversation 1,170.2 against 1,185.4 ms with
// room for the working set and 1,311.7 against 1,325.8 at the default
// capacity; synthetic 755.7 against 754.7 (level) and 818.2 against 827.2.
// 64 and 1,024 land within 0.5% of 128 everywhere, 256 within 0.9%; 16 and
// 32 are worse on conversation
// (docs/benchmarks/2026-12-01-routing-prefill-scale.md).
const DefaultPrefillLoadScale = 128

// DefaultOwnPrefillWeight counts a request's own uncached blocks 8 times a
// block already queued. Greedy per-request TTFT (weight 1) sends a turn
// away from the worker holding its prefix whenever that worker's queue is
// longer than the recompute, but the recompute then delays every request
// queued behind it on the other worker, and the next turn finds its prefix
// in two places or in the wrong one. On the Mooncake traces at 8 workers,
// weights 1, 2, 4, 8 give the same mean TTFT within noise and prefix hit
// ratios of 75, 85, 92, 96% of the infinite-cache ceiling (conversation),
// 81, -, 97, 100% (synthetic)
// (docs/benchmarks/2026-11-30-routing-own-prefill-weight.md).
const DefaultOwnPrefillWeight = 8

// DefaultPrefixPullWeight credits a block a worker would copy from a peer
// (prefix pull) almost as much as one it holds: the copy costs a few
// percent of the block's prefill (84 µs against ~2 ms for 16 tokens at
// 25 GB/s), and the request waits for it in its place in the queue. Just
// below 1 so that a tie goes to the holder, which needs no copy. With
// routesim on the conversation trace, 0.99 gives kv 1,185 ms mean TTFT, 1
// gives 1,191 and 0.95 1,192
// (docs/benchmarks/2026-12-01-routing-prefix-pull.md).
const DefaultPrefixPullWeight = 0.99

// DefaultParams are the router's defaults.
func DefaultParams() Params {
	return Params{Weights: DefaultTierWeights(), PrefillLoadScale: DefaultPrefillLoadScale, OwnPrefillWeight: DefaultOwnPrefillWeight,
		PrefixPullWeight: DefaultPrefixPullWeight}
}

// WeightedScorer names a scorer and its weight in the combined score.
type WeightedScorer struct {
	Name   string
	Weight float64
}

// ModeSpec is a mode as plugin names.
type ModeSpec struct {
	Filters []string
	Scorers []WeightedScorer
	Picker  string
}

// Registry maps plugin and mode names to factories. The zero value is
// empty; NewRegistry returns one with the built-in plugins and modes.
type Registry struct {
	filters map[string]func(Params) Filter
	scorers map[string]func(Params) Scorer
	pickers map[string]func(Params) Picker
	modes   map[string]ModeSpec
}

// Built-in mode names.
const (
	ModeKV          = "kv"
	ModeRoundRobin  = "round-robin"
	ModeRandom      = "random"
	ModeLeastLoaded = "least-loaded"
	ModeDirect      = "direct"
)

// NewRegistry returns a registry of the built-in plugins and modes.
func NewRegistry() *Registry {
	r := &Registry{}
	r.RegisterFilter("worker-id", func(Params) Filter { return workerIDFilter{} })
	r.RegisterScorer("kv-cost", func(p Params) Scorer { return newCostScorer(p, true) })
	r.RegisterScorer("load", func(p Params) Scorer { return newCostScorer(p, false) })
	r.RegisterPicker("softmax", func(p Params) Picker { return softmaxPicker{temperature: p.Temperature} })
	r.RegisterPicker("argmax", func(Params) Picker { return softmaxPicker{} })
	r.RegisterPicker("random", func(Params) Picker { return randomPicker{} })
	r.RegisterPicker("round-robin", func(Params) Picker { return roundRobinPicker{next: new(atomic.Uint64)} })
	r.RegisterMode(ModeKV, ModeSpec{Scorers: []WeightedScorer{{"kv-cost", 1}}, Picker: "softmax"})
	r.RegisterMode(ModeLeastLoaded, ModeSpec{Scorers: []WeightedScorer{{"load", 1}}, Picker: "argmax"})
	r.RegisterMode(ModeRoundRobin, ModeSpec{Picker: "round-robin"})
	r.RegisterMode(ModeRandom, ModeSpec{Picker: "random"})
	// Direct still scores, so the response explains the chosen worker.
	r.RegisterMode(ModeDirect, ModeSpec{Filters: []string{"worker-id"}, Scorers: []WeightedScorer{{"kv-cost", 1}}, Picker: "argmax"})
	return r
}

func put[T any](m *map[string]T, name string, v T) {
	if *m == nil {
		*m = map[string]T{}
	}
	(*m)[name] = v
}

// RegisterFilter adds or replaces a filter factory.
func (r *Registry) RegisterFilter(name string, f func(Params) Filter) { put(&r.filters, name, f) }

// RegisterScorer adds or replaces a scorer factory.
func (r *Registry) RegisterScorer(name string, f func(Params) Scorer) { put(&r.scorers, name, f) }

// RegisterPicker adds or replaces a picker factory.
func (r *Registry) RegisterPicker(name string, f func(Params) Picker) { put(&r.pickers, name, f) }

// RegisterMode adds or replaces a mode.
func (r *Registry) RegisterMode(name string, m ModeSpec) { put(&r.modes, name, m) }

// Modes lists the registered mode names, sorted.
func (r *Registry) Modes() []string {
	out := make([]string, 0, len(r.modes))
	for m := range r.modes {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// Build makes the profile of mode with p.
func (r *Registry) Build(mode string, p Params) (*Profile, error) {
	spec, ok := r.modes[mode]
	if !ok {
		return nil, fmt.Errorf("policy: unknown mode %q (have %v)", mode, r.Modes())
	}
	prof := &Profile{Name: mode}
	for _, name := range spec.Filters {
		f, ok := r.filters[name]
		if !ok {
			return nil, fmt.Errorf("policy: mode %q: unknown filter %q", mode, name)
		}
		prof.filters = append(prof.filters, f(p))
	}
	for _, ws := range spec.Scorers {
		f, ok := r.scorers[ws.Name]
		if !ok {
			return nil, fmt.Errorf("policy: mode %q: unknown scorer %q", mode, ws.Name)
		}
		prof.scorers = append(prof.scorers, f(p))
		prof.weights = append(prof.weights, ws.Weight)
	}
	f, ok := r.pickers[spec.Picker]
	if !ok {
		return nil, fmt.Errorf("policy: mode %q: unknown picker %q", mode, spec.Picker)
	}
	prof.picker = f(p)
	return prof, nil
}

// Profile is a built mode. It is safe for concurrent use.
type Profile struct {
	Name    string
	filters []Filter
	scorers []Scorer
	weights []float64
	picker  Picker
}

// Scratch is per-goroutine scratch space that makes Pick allocation-free.
type Scratch struct{ scores, tmp []float64 }

// Pick runs the chain over cs and returns the candidates that survived the
// filters (scored, possibly a sub-slice of cs) and the chosen index in it.
func (p *Profile) Pick(r *Request, cs []Candidate, rng *rand.Rand, s *Scratch) ([]Candidate, int, error) {
	var err error
	for _, f := range p.filters {
		if cs, err = f.Filter(r, cs); err != nil {
			return nil, -1, err
		}
	}
	if len(cs) == 0 {
		return nil, -1, ErrNoCandidates
	}
	s.scores = resize(s.scores, len(cs))
	clear(s.scores)
	total := 0.0
	for i, sc := range p.scorers {
		s.tmp = resize(s.tmp, len(cs))
		sc.Score(r, cs, s.tmp)
		for j, v := range s.tmp {
			s.scores[j] += p.weights[i] * v
		}
		total += p.weights[i]
	}
	if total > 0 {
		for j := range s.scores {
			s.scores[j] /= total
		}
	}
	return cs, p.picker.Pick(r, cs, s.scores, rng), nil
}

func resize(b []float64, n int) []float64 {
	if cap(b) < n {
		return make([]float64, n)
	}
	return b[:n]
}
