// Package fleet builds the console's view of the mesh: one snapshot of
// every registered instance, each worker's load, the planner's plan and
// the frontend's own latency, refreshed on one shared loop and cached as
// JSON. Browsers and CLIs read the cached bytes; none of them triggers a
// poll, so the cost of the console is set by the fleet's size and the
// poll interval, never by how many people watch it.
package fleet

import "time"

// Health values of an Instance.
const (
	// HealthPassing: listed by discovery and, for a worker, its GetLoad
	// answered in this round.
	HealthPassing = "passing"
	// HealthUnreachable: listed by discovery, but its GetLoad failed or
	// timed out in this round.
	HealthUnreachable = "unreachable"
)

// Snapshot is what the console shows; it is served as JSON.
type Snapshot struct {
	// Seq numbers snapshots from 1; a client that saw Seq n needs n+1.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Instances is every instance discovery lists, by role then ID.
	Instances []Instance `json:"instances"`
	// Plan is the planner's last GetPlan, nil without a reachable planner.
	Plan *Plan `json:"plan,omitempty"`
	// Routing is the routers' decisions over the last interval, nil on the
	// first poll and without a router that answered twice.
	Routing *Routing `json:"routing,omitempty"`
	// Latency is the frontend's recent history, oldest first.
	Latency []Point `json:"latency"`
	// Errors are this round's failures to reach the planner or discovery
	// (one line each; worker failures show as their health).
	Errors []string `json:"errors,omitempty"`
}

// Instance is one registered service instance and, for workers, its load.
type Instance struct {
	ID      string `json:"id"`
	Role    string `json:"role"`
	Model   string `json:"model,omitempty"`
	Version string `json:"version"`
	Address string `json:"address"`
	Canary  bool   `json:"canary,omitempty"`
	// Cordoned: an operator cordoned the worker; it is up but routers send
	// it no new requests.
	Cordoned bool   `json:"cordoned,omitempty"`
	Health   string `json:"health"`
	// Load is nil for roles that are not workers, and for a worker that
	// did not answer.
	Load *Load `json:"load,omitempty"`
}

// Load is a worker's GetLoad, with its KV tiers.
type Load struct {
	Running              uint32 `json:"running"`
	Waiting              uint32 `json:"waiting"`
	PendingPrefillTokens uint32 `json:"pending_prefill_tokens"`
	KV                   []Tier `json:"kv"`
}

// Tier is one KV tier of a worker, in blocks.
type Tier struct {
	// Name is "device" (the worker's pool), "host", "disk" or "shared".
	Name string `json:"name"`
	// Used is nil when the worker does not report it (its lower tiers
	// publish only their capacity).
	Used  *uint32 `json:"used,omitempty"`
	Total uint32  `json:"total"`
}

// Plan is the planner's view: desired against observed pools.
type Plan struct {
	Reason    string    `json:"reason"`
	Leader    bool      `json:"leader"`
	DecidedAt time.Time `json:"decided_at"`
	Pools     []Pool    `json:"pools"`
	// Rollouts are the canary rollouts the planner runs, by role.
	Rollouts []Rollout `json:"rollouts,omitempty"`
}

// Rollout is one role's canary and how its judge sees it.
type Rollout struct {
	Role    string    `json:"role"`
	Version string    `json:"version"`
	Weight  float64   `json:"weight"`
	Judge   bool      `json:"judge"`
	State   string    `json:"state"`
	Reason  string    `json:"reason"`
	Changed time.Time `json:"changed_at"`
	// Canary and Baseline are what the judge last compared.
	Canary   Side `json:"canary"`
	Baseline Side `json:"baseline"`
}

// Side is one side of a rollout's comparison, latencies in seconds.
type Side struct {
	Requests float64 `json:"requests"`
	Errors   float64 `json:"errors"`
	TTFTP50  float64 `json:"ttft_p50"`
	TTFTP99  float64 `json:"ttft_p99"`
	ITLP50   float64 `json:"itl_p50"`
	ITLP99   float64 `json:"itl_p99"`
}

// Pool is one role's pool of one model.
type Pool struct {
	Model    string `json:"model"`
	Role     string `json:"role"`
	Observed uint32 `json:"observed"`
	Desired  uint32 `json:"desired"`
	Rule     string `json:"rule"`
	Reason   string `json:"reason"`
	Pending  bool   `json:"pending,omitempty"`
}

// Point is the frontend's latency over one poll interval, in seconds,
// from the requests that finished in it (zero without any).
type Point struct {
	// Time is the end of the interval, Unix milliseconds.
	Time    int64   `json:"t"`
	TTFTP50 float64 `json:"ttft_p50"`
	TTFTP99 float64 `json:"ttft_p99"`
	ITLP50  float64 `json:"itl_p50"`
	ITLP99  float64 `json:"itl_p99"`
	// Requests is how many first tokens the interval saw.
	Requests uint64 `json:"requests"`
	// HitRatio is the share of the interval's prompt tokens served from a
	// KV cache (the router's placement at work), nil without prompts.
	HitRatio *float64 `json:"hit_ratio,omitempty"`
	// Phases break the workers' time to first token down, mean seconds a
	// request over the interval (nil without requests, or from workers
	// that report none).
	Phases *Phases `json:"ttft_phases,omitempty"`
}

// Phases is a mean time to first token on the workers, by phase, in
// seconds (WorkerService.GetLoad's ttft_phases): what the frontend's TTFT
// spends in the worker's queue, computing the prompt, moving KV from a
// prefill worker or a peer, and until the decode engine's first token
// after a KV import. The rest of the frontend's TTFT is routing and the
// network.
type Phases struct {
	Requests    uint64  `json:"requests"`
	Queue       float64 `json:"queue"`
	Prefill     float64 `json:"prefill"`
	Transfer    float64 `json:"transfer"`
	FirstDecode float64 `json:"first_decode"`
}
