package policy

import (
	"math/rand/v2"
	"testing"

	"switchyard.dev/libs/kvtier"
)

// harness replays routing decisions against a fixed cluster: workers with
// cached prefixes and loads, plus the load each decision predicts, the way
// the router's load tracker adds it.
type harness struct {
	t       *testing.T
	prof    *Profile
	workers []Candidate
	rng     *rand.Rand
	scratch Scratch
}

func newHarness(t *testing.T, mode string, p Params, workers ...Candidate) *harness {
	t.Helper()
	prof, err := NewRegistry().Build(mode, p)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, prof: prof, workers: workers, rng: rand.New(rand.NewPCG(1, 2))}
}

// route places one request and returns the chosen worker id.
func (h *harness) route(r Request) string {
	h.t.Helper()
	cs := append([]Candidate(nil), h.workers...)
	got, i, err := h.prof.Pick(&r, cs, h.rng, &h.scratch)
	if err != nil {
		h.t.Fatalf("pick: %v", err)
	}
	return got[i].ID
}

// routeAndLoad routes and then adds the request's predicted load (its
// uncached prompt blocks to prefill, all its blocks to decode).
func (h *harness) routeAndLoad(r Request) string {
	id := h.route(r)
	for i := range h.workers {
		if w := &h.workers[i]; w.ID == id {
			w.PrefillBlocks += float64(r.Blocks) - DefaultTierWeights().Credit(w.Depth)
			w.DecodeBlocks += float64(r.Blocks)
		}
	}
	return id
}

func worker(id string, device, host, disk, external int) Candidate {
	return Candidate{ID: id, Depth: [kvtier.Count]int{device, host, disk, external}}
}
