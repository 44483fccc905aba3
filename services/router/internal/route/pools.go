package route

import (
	"strconv"

	"switchyard.dev/libs/mesh/discovery"
)

// Worker is a routable worker.
type Worker struct {
	ID  string
	URL string
	// Pull: the worker copies a prompt's prefix from a peer the router
	// names (prefix pull); Export: it has a KV transfer agent, so peers
	// can copy from it.
	Pull, Export bool
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

// buildPools groups decode and prefill instances by model. A model's block
// size is its workers' "block_size" meta (the first valid one wins), else
// def.
func buildPools(decode, prefill []discovery.Instance, def int, prevKnown map[string]bool) *pools {
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
		mp := get(in)
		mp.decodePos[in.ID] = len(mp.decode)
		mp.decode = append(mp.decode, Worker{ID: in.ID, URL: in.URL(),
			Pull: in.Meta[discovery.MetaPrefixPull] == "1", Export: in.Meta[discovery.MetaKVTransfer] != ""})
		mp.decodeIDs = append(mp.decodeIDs, in.ID)
	}
	for _, in := range prefill {
		mp := get(in)
		mp.prefillAt[in.ID] = len(mp.prefill)
		mp.prefill = append(mp.prefill, Worker{ID: in.ID, URL: in.URL()})
		mp.prefillID = append(mp.prefillID, in.ID)
	}
	for _, mp := range p.models {
		if mp.blockSize == 0 {
			mp.blockSize = def
		}
	}
	return p
}
