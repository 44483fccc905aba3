package policy

import (
	"testing"
	"time"
)

// FuzzStep feeds arbitrary observations to planners of several shapes and
// checks what no input may break: no panic, each Desired within its pool's
// limits, the pools within the budget, a scale-down of one at most after
// the first Step, a rule and a reason on every decision.
func FuzzStep(f *testing.F) {
	f.Add(uint8(0), 30.0, 512.0, 256.0, 0.3, 0.05, 300, 2, 2, 5, 0.5)
	f.Add(uint8(1), 1e9, 1e6, 1e6, 1e3, 1e3, 1<<30, 1000, 0, 1<<20, 1.0)
	f.Add(uint8(2), 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, 0, 0.0)
	f.Add(uint8(3), 5.0, 1.0, 1.0, 1e-9, 1e-9, 1, 1, 1, 1, 0.99)
	f.Fuzz(func(t *testing.T, shape uint8, rate, isl, osl, ttft, itl float64, samples, prefill, decode, waiting int, kv float64) {
		cfg := testConfig()
		cfg.Disaggregated = shape&1 == 0
		if shape&2 != 0 {
			cfg.Budget = 5
		}
		if shape&4 != 0 {
			cfg.TTFT, cfg.ITL = time.Millisecond, time.Millisecond // infeasible
		}
		if shape&8 != 0 {
			cfg.Prefill.Min, cfg.Decode.Min = 0, 0
		}
		p, err := New(cfg, testProfile(), Predictors{})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Unix(0, 0)
		obs := Observation{Rate: rate, MeanISL: isl, MeanOSL: osl, TTFTP90: ttft, ITLP90: itl, Samples: samples,
			Replicas: Replicas{prefill, decode}, Prefill: Queue{waiting, kv}, Decode: Queue{waiting, kv}}
		var last Decision
		for i := range 4 {
			d := p.Step(now, obs)
			pools := []struct {
				pd   PoolDecision
				lim  Limits
				prev int
			}{{d.Decode, cfg.Decode, last.Decode.Desired}}
			if cfg.Disaggregated {
				pools = append(pools, struct {
					pd   PoolDecision
					lim  Limits
					prev int
				}{d.Prefill, cfg.Prefill, last.Prefill.Desired})
			}
			total := 0
			for _, pl := range pools {
				total += pl.pd.Desired
				if pl.pd.Desired < pl.lim.Min || pl.pd.Desired > pl.lim.Max || pl.pd.Rule == "" || pl.pd.Reason == "" ||
					(i > 0 && pl.pd.Desired < pl.prev-1) {
					t.Fatalf("step %d: %+v (limits %+v, previous %d)", i, pl.pd, pl.lim, pl.prev)
				}
			}
			if total > cfg.budget() {
				t.Fatalf("step %d: %d replicas over budget %d: %+v", i, total, cfg.budget(), d)
			}
			last = d
			obs.Replicas = Replicas{d.Prefill.Desired, d.Decode.Desired}
			now = now.Add(cfg.Interval)
		}
	})
}
