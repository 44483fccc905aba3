package policy

import (
	"errors"
	"math/rand/v2"

	"switchyard.dev/libs/kvtier"
)

// Candidate is one worker that could serve the request, with what the
// router knows about it. Scorers fill Overlap and Cost.
type Candidate struct {
	ID string
	// Depth[t] is the request's leading blocks the worker holds in tiers no
	// slower than t (cumulative, as radix reports it).
	Depth [kvtier.Count]int
	// PrefillBlocks are prompt blocks admitted but not yet prefilled
	// (predicted by the router); DecodeBlocks are KV blocks held by
	// requests decoding on the worker.
	PrefillBlocks float64
	DecodeBlocks  float64
	// PeerDepth is the request's leading blocks that another worker holds
	// on device and this one could copy from it (prefix pull); 0 when it
	// cannot pull. Only blocks beyond Depth[kvtier.External] count.
	PeerDepth int
	// Weights, when set, are this worker's own tier credits (derived from
	// its measured load times); nil uses the policy's.
	Weights *TierWeights

	// Overlap is the tier-weighted overlap credit, in blocks.
	Overlap float64
	// Cost is the cost the last cost scorer computed.
	Cost float64
}

// Request is what the policy knows about the request being placed.
type Request struct {
	// Blocks is the number of full prompt blocks.
	Blocks int
	// WorkerID is the worker the client asked for (mode direct).
	WorkerID string
	// Exclude are workers to avoid (ones that just failed this request).
	Exclude []string
}

// Errors a Profile returns.
var (
	// ErrNoCandidates: no worker is left to choose from.
	ErrNoCandidates = errors.New("policy: no candidate workers")
	// ErrWorkerNotFound: the worker a request names is not a candidate.
	ErrWorkerNotFound = errors.New("policy: requested worker is not a candidate")
	// ErrNoWorkerID: mode direct without a worker id in the hints.
	ErrNoWorkerID = errors.New("policy: mode direct needs hints.worker_id")
)

// Filter narrows the candidates. It may reorder or reuse cs.
type Filter interface {
	Filter(r *Request, cs []Candidate) ([]Candidate, error)
}

// Scorer writes a score in [0, 1] (1 best) for every candidate into
// scores, which has len(cs).
type Scorer interface {
	Score(r *Request, cs []Candidate, scores []float64)
}

// Picker returns the index of the chosen candidate; len(cs) > 0.
type Picker interface {
	Pick(r *Request, cs []Candidate, scores []float64, rng *rand.Rand) int
}
