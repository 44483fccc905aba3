package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"

	"switchyard.dev/libs/kvtier"
)

// workerIDFilter keeps only the worker the request names (mode direct).
type workerIDFilter struct{}

func (workerIDFilter) Filter(r *Request, cs []Candidate) ([]Candidate, error) {
	if r.WorkerID == "" {
		return nil, ErrNoWorkerID
	}
	for i := range cs {
		if cs[i].ID == r.WorkerID {
			return cs[i : i+1], nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrWorkerNotFound, r.WorkerID)
}

// costScorer scores by the KV-aware cost; with overlap off it is the
// least-loaded cost (prompt blocks count fully everywhere).
type costScorer struct {
	weights TierWeights
	scale   float64
	own     float64 // weight of the request's own uncached blocks (>= 1)
	pull    float64 // credit of a block copied from a peer
	overlap bool
}

func newCostScorer(p Params, overlap bool) costScorer {
	return costScorer{weights: p.Weights, scale: p.PrefillLoadScale, own: max(p.OwnPrefillWeight, 1), pull: p.PrefixPullWeight, overlap: overlap}
}

func (s costScorer) Score(r *Request, cs []Candidate, scores []float64) {
	maxCost := 0.0
	for i := range cs {
		c := &cs[i]
		w := &s.weights
		if c.Weights != nil {
			w = c.Weights
		}
		c.Overlap = w.Credit(c.Depth) + s.pull*float64(max(c.PeerDepth-c.Depth[kvtier.External], 0))
		credit := c.Overlap
		if !s.overlap {
			credit = 0
		}
		c.Cost = s.scale*(max(c.PrefillBlocks, 0)+s.own*max(float64(r.Blocks)-credit, 0)) + c.DecodeBlocks
		maxCost = max(maxCost, c.Cost)
	}
	for i := range cs {
		scores[i] = 1
		if maxCost > 0 {
			scores[i] = 1 - cs[i].Cost/maxCost
		}
	}
}

// softmaxPicker picks the best score (random tie-break) at temperature 0
// and samples softmax(score / temperature) above it.
type softmaxPicker struct{ temperature float64 }

func (p softmaxPicker) Pick(_ *Request, _ []Candidate, scores []float64, rng *rand.Rand) int {
	if p.temperature <= 0 {
		return argmaxRandomTie(scores, rng)
	}
	best := math.Inf(-1)
	for _, s := range scores {
		best = max(best, s)
	}
	sum := 0.0
	for _, s := range scores {
		sum += math.Exp((s - best) / p.temperature)
	}
	x := rng.Float64() * sum
	for i, s := range scores {
		x -= math.Exp((s - best) / p.temperature)
		if x < 0 {
			return i
		}
	}
	return len(scores) - 1
}

// argmaxRandomTie returns a uniformly random index among the best scores,
// in one pass (reservoir sampling over ties).
func argmaxRandomTie(scores []float64, rng *rand.Rand) int {
	best, ties, pick := math.Inf(-1), 0, 0
	for i, s := range scores {
		switch {
		case s > best:
			best, ties, pick = s, 1, i
		case s == best:
			ties++
			if rng.IntN(ties) == 0 {
				pick = i
			}
		}
	}
	return pick
}

type randomPicker struct{}

func (randomPicker) Pick(_ *Request, cs []Candidate, _ []float64, rng *rand.Rand) int {
	return rng.IntN(len(cs))
}

// roundRobinPicker cycles through the candidates; its counter belongs to
// the profile, so each router (and each test) has its own.
type roundRobinPicker struct{ next *atomic.Uint64 }

func (p roundRobinPicker) Pick(_ *Request, cs []Candidate, _ []float64, _ *rand.Rand) int {
	return int((p.next.Add(1) - 1) % uint64(len(cs)))
}
