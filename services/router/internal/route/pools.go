package route

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/router/internal/policy"
)

// DerivedCredit returns the tier credits of a worker from the load times
// it measured and published (discovery.MetaKVLoadNanos) against its
// measured prefill time per block (MetaKVPrefillBlockNanos; without it,
// prefillBlock): a block in a tier counts for the share of its prefill
// that loading it saves (policy.DeriveTierWeights). Tiers it measured
// nothing for keep fallback's weights; nil when it published no times,
// or malformed ones (logged by nobody: the fixed weights then apply).
func DerivedCredit(in discovery.Instance, prefillBlock time.Duration, fallback policy.TierWeights) *policy.TierWeights {
	v, ok := in.Meta[discovery.MetaKVLoadNanos]
	if !ok {
		return nil
	}
	load, err := kvtier.ParseTimes(v)
	if err != nil {
		return nil
	}
	if n, err := strconv.ParseInt(in.Meta[discovery.MetaKVPrefillBlockNanos], 10, 64); err == nil && n > 0 {
		prefillBlock = time.Duration(n)
	}
	w := policy.DeriveTierWeights(load, prefillBlock, fallback)
	return &w
}

// Worker is a routable worker.
type Worker struct {
	ID  string
	URL string
	// Pull: the worker copies a prompt's prefix from a peer the router
	// names (prefix pull); Export: it has a KV transfer agent, so peers
	// can copy from it.
	Pull, Export bool
	// Shared: the worker loads from the model's shared tier.
	Shared bool
	// Weights are the worker's tier credits derived from the load times
	// it measured (nil: it published none, or derivation is off).
	Weights *policy.TierWeights
	// Version is the worker's build version; Tagged: it carries
	// discovery.TagCanary. Whether it is in its role's canary group is
	// decided per request (the rollouts change apart from discovery).
	Version string
	Tagged  bool
}

// SharedHolder is the index name under which the router follows the
// shared tier of a model and block size. Worker ids cannot hold ':', so
// it never names a worker.
func SharedHolder(model string, blockSize int) string {
	return "shared:" + strconv.Itoa(blockSize) + ":" + model
}

// SharedNamespace is a model and the block size its pool routes with:
// what the router follows of the shared tier, under SharedHolder.
type SharedNamespace struct {
	Model     string
	BlockSize int
}

// SharedNamespaces lists the models of the workers set last, with the
// block sizes their pools use (the holders decisions look up), sorted.
func (r *Router) SharedNamespaces() []SharedNamespace {
	p := r.pools.Load()
	out := make([]SharedNamespace, 0, len(p.models))
	for model, mp := range p.models {
		if model != "" {
			out = append(out, SharedNamespace{Model: model, BlockSize: mp.blockSize})
		}
	}
	slices.SortFunc(out, func(a, b SharedNamespace) int { return strings.Compare(a.Model, b.Model) })
	return out
}

// modelPool is the workers serving one model: immutable once published.
//
// Per role, the ID list and the position map are derived from the worker
// list on purpose, once per discovery change instead of once per Route:
// the IDs are the argument load.Tracker.Get takes as is, and the map finds
// a radix match's worker in O(1). Both follow the worker list's order
// (ids[i] == workers[i].ID, pos[workers[i].ID] == i); buildPools is the
// only writer, and TestBuildPoolsDerivedFields checks it.
type modelPool struct {
	blockSize int
	// shared is the index holder of the model's shared tier (the
	// kvbm-controller's catalog stream): every decode worker can load
	// what it holds.
	shared    string
	decode    []Worker
	decodeIDs []string
	decodePos map[string]int
	prefill   []Worker
	prefillID []string
	prefillAt map[string]int
}

// pools is an immutable snapshot of every model's workers.
type pools struct {
	models map[string]*modelPool
	known  map[string]bool // every worker id ever seen, for direct mode
}

func (p *pools) pool(model string) *modelPool {
	if p == nil {
		return nil
	}
	return p.models[model]
}

// cordoned reports whether an operator cordoned the worker: it stays up
// (and in the index, so its cache counts again once uncordoned) but takes
// no new requests.
func cordoned(in discovery.Instance) bool { return in.Meta[discovery.MetaCordoned] == "1" }

// buildPools groups decode and prefill instances by model; cordoned
// workers are left out. A model's block
// size is its workers' "block_size" meta (the first valid one wins), else
// def.
func buildPools(decode, prefill []discovery.Instance, def int, prevKnown map[string]bool, credit func(discovery.Instance) *policy.TierWeights) *pools {
	p := &pools{models: map[string]*modelPool{}, known: map[string]bool{}}
	for id := range prevKnown {
		p.known[id] = true
	}
	get := func(in discovery.Instance) *modelPool {
		mp := p.models[in.Model]
		if mp == nil {
			mp = &modelPool{decodePos: map[string]int{}, prefillAt: map[string]int{}}
			p.models[in.Model] = mp
		}
		if n, err := strconv.Atoi(in.Meta[discovery.MetaBlockSize]); err == nil && n > 0 && mp.blockSize == 0 {
			mp.blockSize = n
		}
		p.known[in.ID] = true
		return mp
	}
	for _, in := range decode {
		if cordoned(in) {
			continue
		}
		mp := get(in)
		mp.decodePos[in.ID] = len(mp.decode)
		mp.decode = append(mp.decode, Worker{ID: in.ID, URL: in.URL(),
			Pull: in.Meta[discovery.MetaPrefixPull] == "1", Export: in.Meta[discovery.MetaKVTransfer] != "",
			Shared: in.Meta[discovery.MetaKVSharedBlocks] != "", Weights: credit(in),
			Version: in.Version, Tagged: in.HasTag(discovery.TagCanary)})
		mp.decodeIDs = append(mp.decodeIDs, in.ID)
	}
	for _, in := range prefill {
		if cordoned(in) {
			continue
		}
		mp := get(in)
		mp.prefillAt[in.ID] = len(mp.prefill)
		mp.prefill = append(mp.prefill, Worker{ID: in.ID, URL: in.URL(), Shared: in.Meta[discovery.MetaKVSharedBlocks] != "", Weights: credit(in),
			Version: in.Version, Tagged: in.HasTag(discovery.TagCanary)})
		mp.prefillID = append(mp.prefillID, in.ID)
	}
	for model, mp := range p.models {
		if mp.blockSize == 0 {
			mp.blockSize = def
		}
		mp.shared = SharedHolder(model, mp.blockSize)
	}
	return p
}
