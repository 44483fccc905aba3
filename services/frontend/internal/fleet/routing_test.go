package fleet_test

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/frontend/internal/fleet"
	"switchyard.dev/services/frontend/internal/fleet/fleettest"
)

// fakeRouterMetrics serves a router's /metrics with the counters set.
type fakeRouterMetrics struct {
	mu                                   sync.Mutex
	baseline, canary, requested, matched float64
	chosenA, overlapA, chosenB, overlapB float64
}

func (f *fakeRouterMetrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, _ = io.WriteString(w, fmt.Sprintf(`# TYPE switchyard_router_decisions_total counter
switchyard_router_decisions_total{group="baseline",mode="kv",model="tiny"} %v
switchyard_router_decisions_total{group="canary",mode="kv",model="tiny"} %v
# TYPE switchyard_router_requested_blocks_total counter
switchyard_router_requested_blocks_total{model="tiny"} %v
# TYPE switchyard_router_matched_blocks_total counter
switchyard_router_matched_blocks_total{model="tiny"} %v
# TYPE switchyard_router_overlap_blocks histogram
switchyard_router_overlap_blocks_bucket{model="tiny",worker="decode-a",le="+Inf"} %v
switchyard_router_overlap_blocks_sum{model="tiny",worker="decode-a"} %v
switchyard_router_overlap_blocks_count{model="tiny",worker="decode-a"} %v
switchyard_router_overlap_blocks_bucket{model="tiny",worker="decode-b",le="+Inf"} %v
switchyard_router_overlap_blocks_sum{model="tiny",worker="decode-b"} %v
switchyard_router_overlap_blocks_count{model="tiny",worker="decode-b"} %v
`, f.baseline, f.canary, f.requested, f.matched, f.chosenA, f.overlapA, f.chosenA, f.chosenB, f.overlapB, f.chosenB))
}

// TestPollShowsRouting: the routers' decisions over an interval, summed
// over replicas: decisions a second, the canary share, the hit ratio, and
// per worker its decisions and mean overlap.
func TestPollShowsRouting(t *testing.T) {
	t.Parallel()
	m := fleettest.New()
	r0, r1 := &fakeRouterMetrics{}, &fakeRouterMetrics{}
	m.Add(discovery.Instance{ID: "router-0", Role: discovery.RoleRouter, Version: "v1", Address: "router-0:1"}, r0)
	m.Add(discovery.Instance{ID: "router-1", Role: discovery.RoleRouter, Version: "v1", Address: "router-1:1"}, r1)
	now := time.Unix(1000, 0)
	c := fleet.New(fleet.Config{Registry: m, HTTPClient: m.HTTPClient(), Now: func() time.Time { return now }})
	c.Poll(t.Context())
	if s := decodeFrame(t, c.Latest()); s.Routing != nil {
		t.Errorf("first poll: routing %+v, want none yet", s.Routing)
	}
	for _, f := range []*fakeRouterMetrics{r0, r1} {
		f.mu.Lock()
		f.baseline, f.canary, f.requested, f.matched = 18, 2, 100, 75
		f.chosenA, f.overlapA, f.chosenB, f.overlapB = 15, 60, 5, 0
		f.mu.Unlock()
	}
	now = now.Add(2 * time.Second)
	c.Poll(t.Context())
	s := decodeFrame(t, c.Latest())
	r := s.Routing
	if r == nil {
		t.Fatalf("no routing after two polls: errors %v", s.Errors)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	if !near(r.DecisionsPerSecond, 20) || r.CanaryShare == nil || !near(*r.CanaryShare, 0.1) || r.HitRatio == nil || !near(*r.HitRatio, 0.75) {
		t.Errorf("routing %+v (share %v, hit %v), want 20/s, share 0.1, hit 0.75", r, r.CanaryShare, r.HitRatio)
	}
	a, b := r.Workers["decode-a"], r.Workers["decode-b"]
	if !near(a.DecisionsPerSecond, 15) || !near(a.MeanOverlap, 4) || !near(b.DecisionsPerSecond, 5) || !near(b.MeanOverlap, 0) {
		t.Errorf("workers %+v, want decode-a 15/s at 4 blocks, decode-b 5/s at 0", r.Workers)
	}
	// A router that restarts counts from zero again.
	r1.mu.Lock()
	r1.baseline, r1.canary, r1.chosenA, r1.overlapA, r1.chosenB = 4, 0, 4, 8, 0
	r1.mu.Unlock()
	now = now.Add(2 * time.Second)
	c.Poll(t.Context())
	if r := decodeFrame(t, c.Latest()).Routing; r == nil || !near(r.DecisionsPerSecond, 2) {
		t.Errorf("after a router restart: %+v, want 2/s (its 4 decisions since)", r)
	}
}

// TestIdleRouterIsNoError: a router that has decided nothing exports no
// decision counters yet; that is zero decisions, not a failure.
func TestIdleRouterIsNoError(t *testing.T) {
	t.Parallel()
	m := fleettest.New()
	m.Add(discovery.Instance{ID: "router-0", Role: discovery.RoleRouter, Version: "v1", Address: "router-0:1"},
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "# no decisions yet\n") }))
	c := fleet.New(fleet.Config{Registry: m, HTTPClient: m.HTTPClient()})
	c.Poll(t.Context())
	c.Poll(t.Context())
	s := decodeFrame(t, c.Latest())
	if len(s.Errors) > 0 {
		t.Errorf("errors %v, want none for an idle router", s.Errors)
	}
	if s.Routing == nil || s.Routing.DecisionsPerSecond != 0 {
		t.Errorf("routing %+v, want 0 decisions a second", s.Routing)
	}
}
