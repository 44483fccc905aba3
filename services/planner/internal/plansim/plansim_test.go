package plansim

import (
	"context"
	"iter"
	"testing"
	"time"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/sim"

	"switchyard.dev/services/planner/internal/policy"
)

// steady yields n requests of 1,024-token prompts, rate a second for the
// first half and 4× that after.
func steady(n int, rate float64) iter.Seq[Request] {
	return func(yield func(Request) bool) {
		at := time.Duration(0)
		for i := range n {
			gap := time.Duration(float64(time.Second) / rate)
			if i > n/2 {
				gap /= 4
			}
			at += gap
			prompt := make([]uint32, 1024)
			for j := range prompt {
				prompt[j] = uint32(300 + (i*7919+j*31)%30000)
			}
			if !yield(Request{Arrival: at, Prompt: prompt, Output: 32}) {
				return
			}
		}
	}
}

func testConfig(t *testing.T) Config {
	t.Helper()
	cfg := Config{Engine: engine.Config{NumBlocks: 8192, BlockSize: 16, MaxBatchTokens: 512}, ContextLen: 8192, Timing: sim.Polynomial{},
		Policy: policy.DefaultConfig(), Predictor: "holt-winters"}
	cfg.Policy.Disaggregated = false
	cfg.Policy.TTFT, cfg.Policy.ITL = 500*time.Millisecond, 100*time.Millisecond
	cfg.Policy.Decode = policy.Limits{Min: 1, Max: 8}
	prof, err := MeasureProfile(cfg, []int{128, 512, 2048}, []int{1, 8, 32}, []int{1024, 4096})
	if err != nil {
		t.Fatal(err)
	}
	if prof.PrefillSeconds(2048) <= prof.PrefillSeconds(128) {
		t.Fatalf("measured profile %+v: a longer prompt must take longer", prof.Prefill)
	}
	cfg.Profile = prof
	return cfg
}

// A load that quadruples is met by the planner adding replicas, which
// cost replica-seconds; a static pool of one misses far more often; both
// runs are deterministic.
func TestPlannerFollowsLoad(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	reqs := steady(1200, 4)
	planned, err := Run(context.Background(), cfg, reqs)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Run(context.Background(), cfg, reqs)
	if err != nil {
		t.Fatal(err)
	}
	static := cfg
	static.Static = 1
	one, err := Run(context.Background(), static, reqs)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case planned.Requests != 1200 || one.Requests != 1200:
		t.Fatalf("requests %d and %d, want 1200", planned.Requests, one.Requests)
	case planned.ScaleUps == 0:
		t.Fatalf("the planner never scaled up: %+v", planned.Timeline)
	case planned.Violations >= one.Violations:
		t.Errorf("planner %d violations, static pool of one %d: want fewer", planned.Violations, one.Violations)
	case planned.ReplicaSeconds <= one.ReplicaSeconds:
		t.Errorf("planner %.0f replica-seconds, static one %.0f: the added replicas must cost", planned.ReplicaSeconds, one.ReplicaSeconds)
	case again.Violations != planned.Violations || again.ReplicaSeconds != planned.ReplicaSeconds:
		t.Errorf("two runs differ: %d/%.1f and %d/%.1f", planned.Violations, planned.ReplicaSeconds, again.Violations, again.ReplicaSeconds)
	}
	if one.ReplicaSeconds < one.End.Seconds()*0.99 || one.ReplicaSeconds > one.End.Seconds()*1.01 {
		t.Errorf("a static pool of one costs its run's length: %.1f over %v", one.ReplicaSeconds, one.End)
	}
}

func TestRunRefusesDisaggregated(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.Policy.Disaggregated = true
	if _, err := Run(context.Background(), cfg, steady(1, 1)); err == nil {
		t.Fatal("want an error: the simulated replicas are aggregated")
	}
}
