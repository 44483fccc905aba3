package fleet_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	plannerv1 "switchyard.dev/gen/switchyard/planner/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/frontend/internal/fleet"
	"switchyard.dev/services/frontend/internal/fleet/fleettest"
	"switchyard.dev/services/frontend/internal/metrics"
)

func decodeFrame(t testing.TB, f *fleet.Frame) fleet.Snapshot {
	t.Helper()
	var s fleet.Snapshot
	if err := json.Unmarshal(f.JSON, &s); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return s
}

func TestPollShowsMesh(t *testing.T) {
	t.Parallel()
	m := fleettest.New()
	up := fleettest.NewWorker(&workerv1.GetLoadResponse{RunningRequests: 3, WaitingRequests: 1, KvBlocksUsed: 10, KvBlocksTotal: 100})
	m.AddWorker(0, up)
	down := fleettest.NewWorker(&workerv1.GetLoadResponse{})
	down.Fail.Store(true)
	m.AddWorker(1, down)
	m.Add(discovery.Instance{ID: "router-0", Role: discovery.RoleRouter, Version: "v2", Address: "router-0:1", Tags: []string{discovery.TagCanary}}, nil)
	m.AddPlanner(2, 3)

	c := fleet.New(fleet.Config{Registry: m, HTTPClient: m.HTTPClient()})
	c.Poll(t.Context())
	s := decodeFrame(t, c.Latest())

	if s.Seq != 1 {
		t.Errorf("seq = %d, want 1", s.Seq)
	}
	got := map[string]fleet.Instance{}
	for _, in := range s.Instances {
		got[in.ID] = in
	}
	if len(got) != 4 {
		t.Fatalf("instances = %+v, want 4", s.Instances)
	}
	w := got["decode-0000"]
	if w.Health != fleet.HealthPassing || w.Load == nil || w.Load.Running != 3 || w.Load.Waiting != 1 {
		t.Errorf("decode-0000 = %+v, want passing with running 3, waiting 1", w)
	}
	if len(w.Load.KV) != 2 || *w.Load.KV[0].Used != 10 || w.Load.KV[0].Total != 100 ||
		w.Load.KV[1].Name != "host" || w.Load.KV[1].Total != 4096 || w.Load.KV[1].Used != nil {
		t.Errorf("decode-0000 kv = %+v, want device 10/100 and host ?/4096", w.Load.KV)
	}
	if d := got["decode-0001"]; d.Health != fleet.HealthUnreachable || d.Load != nil {
		t.Errorf("decode-0001 = %+v, want unreachable without load", d)
	}
	if r := got["router-0"]; !r.Canary || r.Version != "v2" || r.Health != fleet.HealthPassing {
		t.Errorf("router-0 = %+v, want canary v2 passing", r)
	}
	if s.Plan == nil || len(s.Plan.Pools) != 1 || s.Plan.Pools[0].Desired != 3 || s.Plan.Pools[0].Observed != 2 ||
		s.Plan.Pools[0].Reason == "" {
		t.Errorf("plan = %+v, want decode desired 3 observed 2 with a reason", s.Plan)
	}
}

func TestPollForgetsRemovedWorkers(t *testing.T) {
	t.Parallel()
	m := fleettest.New()
	m.AddWorker(0, fleettest.NewWorker(&workerv1.GetLoadResponse{}))
	m.AddWorker(1, fleettest.NewWorker(&workerv1.GetLoadResponse{}))
	c := fleet.New(fleet.Config{Registry: m, HTTPClient: m.HTTPClient()})
	c.Poll(t.Context())
	m.Remove("decode-0000")
	c.Poll(t.Context())
	s := decodeFrame(t, c.Latest())
	if len(s.Instances) != 1 || s.Instances[0].ID != "decode-0001" {
		t.Errorf("instances = %+v, want decode-0001 only", s.Instances)
	}
}

func TestReplacedSignalsNextFrame(t *testing.T) {
	t.Parallel()
	m := fleettest.New()
	c := fleet.New(fleet.Config{Registry: m, HTTPClient: m.HTTPClient()})
	first := c.Latest()
	select {
	case <-first.Replaced():
		t.Fatal("replaced before any poll")
	default:
	}
	c.Poll(t.Context())
	<-first.Replaced()
	if f := c.Latest(); f.Seq != 1 {
		t.Errorf("latest seq = %d, want 1", f.Seq)
	}
}

func TestLatencyFromFrontendHistograms(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	mt, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	c := fleet.New(fleet.Config{Gatherer: reg, Now: func() time.Time { return now }})
	c.Poll(t.Context()) // primes: no interval yet
	for range 99 {
		mt.TTFT.WithLabelValues("chat", "tiny", "1", "1").Observe(0.010)
	}
	mt.TTFT.WithLabelValues("completions", "tiny", "1", "2").Observe(5)
	mt.ITL.WithLabelValues("chat", "tiny", "", "").Observe(0.002)
	mt.PromptTokens.WithLabelValues("tiny").Add(100)
	mt.CachedTokens.WithLabelValues("tiny").Add(25)
	now = now.Add(2 * time.Second)
	c.Poll(t.Context())
	now = now.Add(2 * time.Second)
	c.Poll(t.Context()) // an idle interval

	s := decodeFrame(t, c.Latest())
	if len(s.Latency) != 2 {
		t.Fatalf("latency = %+v, want 2 points", s.Latency)
	}
	p := s.Latency[0]
	if p.Requests != 100 || p.TTFTP50 <= 0.008 || p.TTFTP50 > 0.016 || p.TTFTP99 > 0.016 {
		t.Errorf("busy point = %+v, want 100 requests, ttft p50 and p99 in (8ms,16ms]", p)
	}
	if p.ITLP50 <= 0 || p.HitRatio == nil || *p.HitRatio != 0.25 {
		t.Errorf("busy point = %+v, want itl > 0 and hit ratio 0.25", p)
	}
	if q := s.Latency[1]; q.Requests != 0 || q.TTFTP99 != 0 || q.HitRatio != nil {
		t.Errorf("idle point = %+v, want zeros", q)
	}
	if p.Time != time.Unix(1002, 0).UnixMilli() {
		t.Errorf("time = %d, want the end of the interval", p.Time)
	}
}

func TestHistoryIsBounded(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg); err != nil {
		t.Fatal(err)
	}
	c := fleet.New(fleet.Config{Gatherer: reg, History: 3})
	for range 10 {
		c.Poll(t.Context())
	}
	if s := decodeFrame(t, c.Latest()); len(s.Latency) != 3 || s.Seq != 10 {
		t.Errorf("latency points = %d, seq %d; want 3, 10", len(s.Latency), s.Seq)
	}
}

// TestPollShowsRollouts: the leading planner's rollouts reach the
// snapshot, and the instances of a rollout's version are marked canary,
// as the routers would group them; an ended rollout (weight 1) marks
// none.
func TestPollShowsRollouts(t *testing.T) {
	t.Parallel()
	m := fleettest.New()
	m.AddWorker(0, fleettest.NewWorker(&workerv1.GetLoadResponse{}))
	canary := m.AddWorker(1, fleettest.NewWorker(&workerv1.GetLoadResponse{}))
	canary.Version = "v2"
	m.Remove(canary.ID)
	m.Add(canary, nil)
	p := m.AddPlanner(2, 2)
	p.Rollouts = &plannerv1.GetRolloutsResponse{Leader: true, Rollouts: []*plannerv1.Rollout{{
		Role: discovery.RoleDecode, Version: "v2", Weight: 0.25, Judge: true, State: "judging", Reason: "passed, stepped to weight 0.25",
		Canary: &plannerv1.RolloutSide{Requests: 40, TtftP50Seconds: 0.2}, Baseline: &plannerv1.RolloutSide{Requests: 400},
	}}}
	m.SetMeta("planner-0", map[string]string{discovery.MetaRollouts: "decode=v2@0.25"})
	c := fleet.New(fleet.Config{Registry: m, HTTPClient: m.HTTPClient()})
	c.Poll(t.Context())
	s := decodeFrame(t, c.Latest())
	if s.Plan == nil || len(s.Plan.Rollouts) != 1 {
		t.Fatalf("plan %+v, want one rollout", s.Plan)
	}
	if r := s.Plan.Rollouts[0]; r.Version != "v2" || r.Weight != 0.25 || r.State != "judging" || r.Canary.Requests != 40 || r.Canary.TTFTP50 != 0.2 {
		t.Errorf("rollout %+v", r)
	}
	marked := map[string]bool{}
	for _, in := range s.Instances {
		marked[in.ID] = in.Canary
	}
	if !marked["decode-0001"] || marked["decode-0000"] {
		t.Errorf("canary marks %v, want decode-0001 only", marked)
	}

	m.SetMeta("planner-0", map[string]string{discovery.MetaRollouts: "decode=v2@1"})
	c.Poll(t.Context())
	for _, in := range decodeFrame(t, c.Latest()).Instances {
		if in.Canary {
			t.Errorf("after promotion %s is still marked canary", in.ID)
		}
	}
}

// TestTTFTBreakdown: the workers' phase sums, read twice, give each
// phase's mean over the requests between the reads, summed over workers.
func TestTTFTBreakdown(t *testing.T) {
	t.Parallel()
	m := fleettest.New()
	a := fleettest.NewWorker(&workerv1.GetLoadResponse{TtftPhases: &workerv1.TtftPhases{Requests: 10, QueueSeconds: 1}})
	b := fleettest.NewWorker(&workerv1.GetLoadResponse{TtftPhases: &workerv1.TtftPhases{Requests: 5}})
	m.AddWorker(0, a)
	m.AddWorker(1, b)
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg); err != nil {
		t.Fatal(err)
	}
	c := fleet.New(fleet.Config{Registry: m, HTTPClient: m.HTTPClient(), Gatherer: reg})
	c.Poll(t.Context())
	c.Poll(t.Context()) // no request between: no breakdown
	a.SetLoad(&workerv1.GetLoadResponse{TtftPhases: &workerv1.TtftPhases{Requests: 13, QueueSeconds: 1.3, PrefillSeconds: 0.3}})
	b.SetLoad(&workerv1.GetLoadResponse{TtftPhases: &workerv1.TtftPhases{Requests: 6, QueueSeconds: 0.1, PrefillSeconds: 0.1, TransferSeconds: 0.2, FirstDecodeSeconds: 0.04}})
	c.Poll(t.Context())
	s := decodeFrame(t, c.Latest())
	if len(s.Latency) != 2 || s.Latency[0].Phases != nil {
		t.Fatalf("latency %+v, want two points, the first without phases", s.Latency)
	}
	p := s.Latency[1].Phases
	near := func(got, want float64) bool { return got > want-1e-9 && got < want+1e-9 }
	if p == nil || p.Requests != 4 || !near(p.Queue, 0.1) || !near(p.Prefill, 0.1) || !near(p.Transfer, 0.05) || !near(p.FirstDecode, 0.01) {
		t.Errorf("phases %+v, want 4 requests: queue 0.1, prefill 0.1, transfer 0.05, first decode 0.01", p)
	}
}
