package policy

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"switchyard.dev/services/planner/internal/predict"
	"switchyard.dev/services/planner/internal/profile"
)

func TestScaleUpOnRateStep(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig(), Replicas{1, 1})
	before := h.run(20, 20)
	after := h.step(100)
	for _, pl := range []struct {
		name          string
		before, after PoolDecision
	}{{"prefill", before.Prefill, after.Prefill}, {"decode", before.Decode, after.Decode}} {
		if pl.after.Desired <= pl.before.Desired || pl.after.Rule != RuleUp {
			t.Errorf("%s: step to 100 req/s went %d → %d (%s: %s), want up at once",
				pl.name, pl.before.Desired, pl.after.Desired, pl.after.Rule, pl.after.Reason)
		}
	}
	if !strings.HasPrefix(after.Prefill.Reason, "up 2: observed 100 req/s needs 5 (profile: 40ms a prefill") {
		t.Errorf("prefill reason %q", after.Prefill.Reason)
	}
	// MaxStepUp 2 from 1 reaches the model's 5 on the second interval.
	if d := h.step(100); d.Prefill.Desired != 5 {
		t.Errorf("prefill desired %d a second interval into the step, want 5: %s", d.Prefill.Desired, d.Prefill.Reason)
	}
}

func TestScaleDownAfterDownStable(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	h := newHarness(t, cfg, Replicas{1, 1})
	high := h.run(30, 100)
	for i := range cfg.DownStable - 1 {
		d := h.step(20)
		if d.Prefill.Desired != high.Prefill.Desired || d.Prefill.Rule != RuleStabilizing {
			t.Fatalf("interval %d after the fall: prefill %d (%s: %s), want %d held while stabilizing",
				i+1, d.Prefill.Desired, d.Prefill.Rule, d.Prefill.Reason, high.Prefill.Desired)
		}
		if want := "/3 intervals"; !strings.Contains(d.Prefill.Reason, want) {
			t.Errorf("reason %q does not count intervals", d.Prefill.Reason)
		}
	}
	d := h.step(20)
	if d.Prefill.Desired != high.Prefill.Desired-1 || d.Prefill.Rule != RuleDown {
		t.Fatalf("after DownStable intervals: prefill %d (%s: %s), want %d", d.Prefill.Desired, d.Prefill.Rule, d.Prefill.Reason, high.Prefill.Desired-1)
	}
	if !strings.HasPrefix(d.Prefill.Reason, "down 1: ") || !strings.HasSuffix(d.Prefill.Reason, "for 3 intervals") {
		t.Errorf("reason %q", d.Prefill.Reason)
	}
	// The harness checks that no step drops more than one; the pool gets
	// to the low load's count, one replica per interval.
	low := h.run(20, 10)
	if low.Prefill.Desired != 1 || low.Decode.Desired != 1 {
		t.Errorf("at 10 req/s settled at prefill %d, decode %d; want 1 and 1", low.Prefill.Desired, low.Decode.Desired)
	}
}

func TestNoDownWithinCooldown(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.MaxStepUp = 8
	cfg.DownStable = 1 // leave the cooldown as the only brake
	h := newHarness(t, cfg, Replicas{1, 1})
	h.run(10, 20)
	upAt := h.now
	if d := h.step(100); d.Prefill.Desired != 5 {
		t.Fatalf("prefill %d after the step up, want 5: %s", d.Prefill.Desired, d.Prefill.Reason)
	}
	for h.now.Sub(upAt) < cfg.DownCooldown {
		d := h.step(20)
		if d.Prefill.Desired != 5 || d.Prefill.Rule != RuleCooldown {
			t.Fatalf("%v after the scale-up: prefill %d (%s: %s), want 5 held by the cooldown",
				h.now.Sub(upAt)-cfg.Interval, d.Prefill.Desired, d.Prefill.Rule, d.Prefill.Reason)
		}
	}
	if d := h.step(20); d.Prefill.Desired != 4 {
		t.Errorf("at the cooldown's end: prefill %d (%s), want 4", d.Prefill.Desired, d.Prefill.Reason)
	}
}

func TestUpCooldown(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.UpCooldown = 15 * time.Second
	h := newHarness(t, cfg, Replicas{1, 1})
	h.step(100) // 1 → 3
	if d := h.step(100); d.Prefill.Desired != 3 || d.Prefill.Rule != RuleCooldown {
		t.Errorf("10s after a scale-up: prefill %d (%s: %s), want 3 held", d.Prefill.Desired, d.Prefill.Rule, d.Prefill.Reason)
	}
	if d := h.step(100); d.Prefill.Desired != 5 {
		t.Errorf("20s after: prefill %d (%s), want 5", d.Prefill.Desired, d.Prefill.Reason)
	}
}

func TestBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                    string
		edit                    func(*Config)
		rate, osl               float64
		wantPrefill, wantDecode int
		prefillRule, decodeRule Rule
		reason                  string // in the prefill reason
	}{
		{"max", func(c *Config) {}, 1000, testOSL, 8, 8, RuleMax, RuleMax, "hold, capped by max 8: predicted 1000 req/s needs 41"},
		{"min", func(c *Config) { c.Prefill.Min, c.Decode.Min = 2, 3 }, 0, testOSL, 2, 3, RuleMin, RuleMin, "hold, floor at min 2: predicted 0 req/s needs 0"},
		{"budget even", func(c *Config) { c.Budget = 6 }, 1000, testOSL, 3, 3, RuleBudget, RuleBudget, "capped by budget 6"},
		// prefill wants 8, decode 2: 4 spare split 3.5 to 0.5, the odd one to decode on the tie.
		{"budget proportional", func(c *Config) { c.Budget = 6 }, 160, 64, 4, 2, RuleBudget, RuleHold, "capped by budget 6"},
		{"scale to zero", func(c *Config) { c.Prefill.Min, c.Decode.Min = 0, 0 }, 0, testOSL, 0, 0, RuleHold, RuleHold, "hold: predicted 0 req/s needs 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			tt.edit(&cfg)
			h := newHarness(t, cfg, Replicas{cfg.Prefill.Min, cfg.Decode.Min})
			h.c.osl = tt.osl
			d := h.run(30, tt.rate)
			if d.Prefill.Desired != tt.wantPrefill || d.Decode.Desired != tt.wantDecode {
				t.Errorf("settled at prefill %d, decode %d; want %d, %d\n%s\n%s", d.Prefill.Desired, d.Decode.Desired,
					tt.wantPrefill, tt.wantDecode, d.Prefill.Reason, d.Decode.Reason)
			}
			if d.Prefill.Rule != tt.prefillRule || d.Decode.Rule != tt.decodeRule {
				t.Errorf("rules %s, %s; want %s, %s", d.Prefill.Rule, d.Decode.Rule, tt.prefillRule, tt.decodeRule)
			}
			if !strings.Contains(d.Prefill.Reason, tt.reason) {
				t.Errorf("prefill reason %q, want it to contain %q", d.Prefill.Reason, tt.reason)
			}
		})
	}
}

// TestBudgetGuard: prefill's scale-down waits on DownStable while decode's
// load rises; decode may not take the budget share prefill still holds.
func TestBudgetGuard(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Budget = 9
	h := newHarness(t, cfg, Replicas{1, 1})
	h.run(20, 140) // prefill 7 of 9, decode 2
	h.c.osl = 4 * testOSL
	d := h.step(60) // prefill wants 3, decode 7: prefill still holds 7
	if d.Decode.Rule != RuleBudget || d.Prefill.Desired+d.Decode.Desired > 9 {
		t.Errorf("decode %d (%s: %s) beside prefill %d, want decode capped by the budget",
			d.Decode.Desired, d.Decode.Rule, d.Decode.Reason, d.Prefill.Desired)
	}
	last := h.run(20, 40) // prefill's load falls: it gives replicas back, decode takes them
	if last.Prefill.Desired+last.Decode.Desired > 9 || last.Decode.Desired <= d.Decode.Desired {
		t.Errorf("settled at prefill %d, decode %d (guarded at %d); want decode to take the budget prefill gave back", last.Prefill.Desired, last.Decode.Desired, d.Decode.Desired)
	}
}

func TestOverBudgetAtStart(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Budget = 4
	h := newHarness(t, cfg, Replicas{5, 5})
	d := h.step(20)
	if d.Prefill.Desired+d.Decode.Desired > 4 || d.Prefill.Rule != RuleBudget {
		t.Errorf("first step from 5+5 under budget 4: %d+%d (%s: %s)", d.Prefill.Desired, d.Decode.Desired, d.Prefill.Rule, d.Prefill.Reason)
	}
}

func TestOverMaxAtStart(t *testing.T) {
	t.Parallel()
	h := newHarness(t, testConfig(), Replicas{20, 0})
	d := h.step(20)
	if d.Prefill.Desired != 8 || d.Prefill.Rule != RuleMax || !strings.HasPrefix(d.Prefill.Reason, "down 12, capped by max 8") {
		t.Errorf("first step from 20 prefill replicas, max 8: %+v", d.Prefill)
	}
	if d.Decode.Desired != 1 {
		t.Errorf("first step from 0 decode replicas: %+v, want 1", d.Decode)
	}
}

func TestInfeasible(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		edit   func(*Config)
		pick   func(Decision) PoolDecision
		want   int
		reason string
	}{
		{"TTFT", func(c *Config) { c.TTFT = 30 * time.Millisecond }, func(d Decision) PoolDecision { return d.Prefill },
			8, "TTFT target 30ms below a lone prefill's 40ms: no replica count meets it; planning for the cap 8"},
		{"TTFT within budget", func(c *Config) { c.TTFT = 30 * time.Millisecond; c.Budget = 6 }, func(d Decision) PoolDecision { return d.Prefill },
			5, "capped by budget 6"},
		{"ITL", func(c *Config) { c.ITL = 3 * time.Millisecond }, func(d Decision) PoolDecision { return d.Decode },
			8, "ITL target 3ms below batch-1 ITL 4.08ms: no replica count meets it"},
		{"aggregated", func(c *Config) { c.Disaggregated = false; c.ITL = 3 * time.Millisecond }, func(d Decision) PoolDecision { return d.Decode },
			8, "ITL target 3ms below batch-1 ITL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			tt.edit(&cfg)
			h := newHarness(t, cfg, Replicas{1, 1})
			pd := tt.pick(h.run(10, 5))
			if !pd.Infeasible || pd.Desired != tt.want || pd.Model != 8 || !strings.Contains(pd.Reason, tt.reason) {
				t.Errorf("got %+v; want infeasible at %d with a reason containing %q", pd, tt.want, tt.reason)
			}
		})
	}
}

// TestCorrectionConverges: observed latencies are twice what the profile
// predicts; both corrections converge to 2 and the pools grow until the
// observed p90s meet their targets.
func TestCorrectionConverges(t *testing.T) {
	t.Parallel()
	for _, aggregated := range []bool{false, true} {
		cfg := testConfig()
		cfg.Disaggregated = !aggregated
		cfg.Decode.Max, cfg.Prefill.Max = 20, 20
		h := newHarness(t, cfg, Replicas{1, 1})
		h.c.ttftFactor, h.c.itlFactor = 2, 2
		d := h.run(40, 100)
		if math.Abs(d.TTFTCorrection-2) > 0.01 || math.Abs(d.ITLCorrection-2) > 0.01 || math.Abs(d.Decode.Correction-2) > 0.01 {
			t.Errorf("aggregated %v: corrections TTFT %v, ITL %v, want 2", aggregated, d.TTFTCorrection, d.ITLCorrection)
		}
		obs := h.c.observe(100)
		if obs.TTFTP90 > cfg.TTFT.Seconds() || obs.ITLP90 > cfg.ITL.Seconds() {
			t.Errorf("aggregated %v: settled at %+v: p90 TTFT %v, ITL %v over target", aggregated, obs.Replicas, obs.TTFTP90, obs.ITLP90)
		}
		plain := newHarness(t, cfg, Replicas{1, 1}).run(40, 100)
		if d.Decode.Desired <= plain.Decode.Desired {
			t.Errorf("aggregated %v: corrected decode %d, uncorrected %d; want more", aggregated, d.Decode.Desired, plain.Decode.Desired)
		}
	}
}

func TestCorrectionNeedsSamples(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.MinSamples = 1000 // 100 req/s × 10 s = 1000: only just enough
	h := newHarness(t, cfg, Replicas{1, 1})
	h.c.ttftFactor = 2
	if d := h.run(5, 99); d.TTFTCorrection != 1 {
		t.Errorf("correction %v from intervals of 990 samples, want 1", d.TTFTCorrection)
	}
	if d := h.run(5, 100); d.TTFTCorrection == 1 {
		t.Error("correction did not move with 1000 samples an interval")
	}
}

// TestOscillationGuard: at a steady load with 5% noise, sitting on the
// boundary between two prefill counts (60 req/s needs exactly 3), the
// desired counts turn at most once (the initial rise) over 300 intervals.
func TestOscillationGuard(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"holt-winters", "constant", "kalman"} {
		t.Run(spec, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			h := newHarness(t, cfg, Replicas{1, 1})
			rate, err := predict.Parse(spec)
			if err != nil {
				t.Fatal(err)
			}
			h.p.rate = rate
			rng := rand.New(rand.NewPCG(7, 11))
			for range 300 {
				h.step(60 * (1 + 0.05*(2*rng.Float64()-1)))
			}
			for _, pool := range []struct {
				name   string
				decode bool
			}{{"prefill", false}, {"decode", true}} {
				xs := h.desired(pool.decode)
				if n := directionChanges(xs); n > 1 {
					t.Errorf("%s changed direction %d times: %v", pool.name, n, xs)
				}
			}
		})
	}
}

func TestAggregated(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Disaggregated = false
	cfg.Decode.Max = 20
	h := newHarness(t, cfg, Replicas{0, 1})
	d := h.run(30, 60)
	if d.Prefill.Rule != RuleOff || !strings.Contains(d.Decode.Reason, "corrections TTFT 1.00, ITL 1.00") {
		t.Errorf("prefill %s, decode reason %q", d.Prefill.Rule, d.Decode.Reason)
	}
	obs := h.c.observe(60)
	if obs.TTFTP90 > cfg.TTFT.Seconds() || obs.ITLP90 > cfg.ITL.Seconds() {
		t.Errorf("settled at %d replicas: p90 TTFT %v, ITL %v over target", d.Decode.Desired, obs.TTFTP90, obs.ITLP90)
	}
	disagg := newHarness(t, testConfig(), Replicas{1, 1}).run(30, 60)
	if d.Decode.Desired < disagg.Decode.Desired || d.Decode.Desired > disagg.Decode.Desired+disagg.Prefill.Desired+2 {
		t.Errorf("aggregated %d replicas; disaggregated %d prefill + %d decode", d.Decode.Desired, disagg.Prefill.Desired, disagg.Decode.Desired)
	}
	// Longer prompts load the same pool's prefill: it grows.
	h.c.isl = 4 * testISL
	if longer := h.run(30, 60); longer.Decode.Desired <= d.Decode.Desired {
		t.Errorf("4× longer prompts: %d replicas, want more than %d", longer.Decode.Desired, d.Decode.Desired)
	}
}

func TestNoData(t *testing.T) {
	t.Parallel()
	p, err := New(testConfig(), testProfile(), Predictors{})
	if err != nil {
		t.Fatal(err)
	}
	d := p.Step(time.Unix(0, 0), Observation{Rate: 50, Replicas: Replicas{2, 3}})
	if d.Prefill.Desired != 2 || d.Decode.Desired != 3 || d.Prefill.Rule != RuleNoData {
		t.Errorf("load without lengths: %+v, want a hold at 2 and 3", d)
	}
}

func TestStepIgnoresGarbage(t *testing.T) {
	t.Parallel()
	p, err := New(testConfig(), testProfile(), Predictors{})
	if err != nil {
		t.Fatal(err)
	}
	d := p.Step(time.Unix(0, 0), Observation{Rate: math.NaN(), MeanISL: math.Inf(1), MeanOSL: -4, TTFTP90: math.NaN(),
		Samples: -1, Replicas: Replicas{-1, 2}, Prefill: Queue{Waiting: -3, KVUsage: math.NaN()}})
	if d.Rate != 0 || d.Prefill.Desired != 1 || d.Decode.Desired != 2 {
		t.Errorf("garbage observation: %+v", d)
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	bad := testProfile()
	bad.KVBlocks = 0
	badCfg := testConfig()
	badCfg.ITL = 0
	tests := []struct {
		name    string
		cfg     Config
		prof    *profile.Profile
		wantErr string
	}{
		{"config", badCfg, testProfile(), "policy config: ITL 0s is not positive"},
		{"no profile", testConfig(), nil, "policy: no profile"},
		{"invalid profile", testConfig(), bad, `policy: profile for "m": kv_blocks 0 is not positive`},
	}
	for _, tt := range tests {
		if _, err := New(tt.cfg, tt.prof, Predictors{}); err == nil || err.Error() != tt.wantErr {
			t.Errorf("%s: New = %v, want %q", tt.name, err, tt.wantErr)
		}
	}
}

// With RateSpread the planned rate carries headroom in proportion to how
// far arrivals strayed from the forecast: a noisy rate plans more
// replicas than the same mean rate held steady.
func TestRateSpreadPlansForBursts(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.RateSpread = 2
	steady := newHarness(t, cfg, Replicas{1, 1})
	noisy := newHarness(t, cfg, Replicas{1, 1})
	var ds, dn Decision
	for i := range 40 {
		ds = steady.step(60)
		dn = noisy.step([]float64{30, 90}[i%2])
	}
	if dn.Prefill.Desired <= ds.Prefill.Desired {
		t.Errorf("noisy arrivals plan prefill %d, steady %d: want more headroom for the noisy ones", dn.Prefill.Desired, ds.Prefill.Desired)
	}
}
