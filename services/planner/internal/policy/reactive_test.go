package policy

import (
	"strings"
	"testing"
	"time"
)

func TestReactive(t *testing.T) {
	t.Parallel()
	base := Observation{Rate: 30, MeanISL: testISL, MeanOSL: testOSL, Samples: 300, Replicas: Replicas{2, 2},
		TTFTP90: 0.1, ITLP90: 0.01}
	tests := []struct {
		name     string
		aggr     bool
		edit     func(*Observation)
		pick     func(Decision) PoolDecision
		want     int
		reactive bool
		reason   string
	}{
		{"TTFT over with a queue", false, func(o *Observation) { o.TTFTP90, o.Prefill.Waiting = 1.3, 12 }, prefillOf, 3, true,
			"up 1, reactive: p90 TTFT 1.3s over target 200ms with 12 waiting (model: 2)"},
		{"TTFT over without a queue", false, func(o *Observation) { o.TTFTP90 = 1.3 }, prefillOf, 2, false, ""},
		{"TTFT within slack", false, func(o *Observation) { o.TTFTP90, o.Prefill.Waiting = 0.219, 12 }, prefillOf, 2, false, ""},
		{"ITL over with a queue", false, func(o *Observation) { o.ITLP90, o.Decode.Waiting = 0.05, 3 }, decodeOf, 3, true,
			"p90 ITL 50ms over target 20ms with 3 waiting"},
		{"ITL over with KV full", false, func(o *Observation) { o.ITLP90, o.Decode.KVUsage = 0.05, 0.97 }, decodeOf, 3, true,
			"p90 ITL 50ms over target 20ms with KV 97% full"},
		{"ITL queue is not the prefill pool's", false, func(o *Observation) { o.ITLP90, o.Decode.Waiting = 0.05, 3 }, prefillOf, 2, false, ""},
		{"aggregated TTFT", true, func(o *Observation) { o.TTFTP90, o.Decode.Waiting, o.Replicas.Decode = 1.3, 12, 4 }, decodeOf, 5, true,
			"up 1, reactive: p90 TTFT 1.3s over target 200ms with 12 waiting (model: 3)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.Disaggregated = !tt.aggr
			cfg.MinSamples = 1 << 30 // corrections off
			p, err := New(cfg, testProfile(), Predictors{})
			if err != nil {
				t.Fatal(err)
			}
			obs := base
			tt.edit(&obs)
			pd := tt.pick(p.Step(time.Unix(0, 0), obs))
			if pd.Desired != tt.want || (pd.Rule == RuleReactive) != tt.reactive || !strings.Contains(pd.Reason, tt.reason) {
				t.Errorf("got desired %d, %s: %q; want %d, reactive %v, reason containing %q", pd.Desired, pd.Rule, pd.Reason, tt.want, tt.reactive, tt.reason)
			}
		})
	}
}

func prefillOf(d Decision) PoolDecision { return d.Prefill }
func decodeOf(d Decision) PoolDecision  { return d.Decode }

// TestReactiveRescuesUnderestimate: the cluster prefills three times
// slower than the profile says and the correction is off; the model alone
// would leave the pool saturated, the reactive rule adds replicas until
// the observed p90 is back under the target.
func TestReactiveRescuesUnderestimate(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.MinSamples = 1 << 30
	h := newHarness(t, cfg, Replicas{1, 1})
	h.c.truth.prof = slower(testProfile(), 3, 1)
	fired, met := false, false
	for range 20 {
		d := h.step(30)
		fired = fired || d.Prefill.Rule == RuleReactive
		if fired && h.c.observe(30).TTFTP90 <= cfg.TTFT.Seconds()*(1+cfg.Slack) {
			met = true
			break
		}
	}
	if !fired || !met {
		t.Errorf("reactive fired %v, p90 TTFT back within target %v; log %v", fired, met, h.desired(false))
	}
}
