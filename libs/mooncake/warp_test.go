package mooncake

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestWarpIdentity(t *testing.T) {
	t.Parallel()
	for _, w := range []*Warper{NewWarper(RateProfile{}), NewWarper(mustProfile(t, "const:1"))} {
		for _, ms := range []float64{0, 1e-9, 0.1, 1, 27, 1234.5678, 3.6e6, 1e15} {
			if got := w.ReplayTime(ms); got != ms {
				t.Errorf("%v: ReplayTime(%g) = %g, want it unchanged", w.Profile(), ms, got)
			}
			if got := w.TraceTime(ms); got != ms {
				t.Errorf("%v: TraceTime(%g) = %g, want it unchanged", w.Profile(), ms, got)
			}
		}
		for _, d := range []time.Duration{0, 1, 3, time.Millisecond + 7, time.Hour} {
			if got := w.Offset(d); got != d {
				t.Errorf("%v: Offset(%v) = %v", w.Profile(), d, got)
			}
		}
	}
}

// TestWarpClosedForms checks replay times against the integral of m done
// by hand.
func TestWarpClosedForms(t *testing.T) {
	t.Parallel()
	sinTau := func(period, lo, hi float64) func(float64) float64 {
		return func(t float64) float64 {
			return (lo+hi)/2*t - (hi-lo)/2*period/(2*math.Pi)*math.Sin(2*math.Pi*t/period)
		}
	}
	tests := []struct {
		profile string
		// tau is τ(t) in ms.
		tau func(t float64) float64
	}{
		{"const:2", func(t float64) float64 { return 2 * t }},
		{"const:0.25", func(t float64) float64 { return t / 4 }},
		{"step:10s,2", func(t float64) float64 { return t + max(t-1e4, 0) }},
		{"step:10s,0.5*const:3", func(t float64) float64 { return 3 * (t - max(t-1e4, 0)/2) }},
		// m = 1 + 2t/10s up to 10 s, then 3.
		{"piecewise:0s=1,10s=3", func(t float64) float64 {
			if t <= 1e4 {
				return t + t*t/1e4
			}
			return 2e4 + 3*(t-1e4)
		}},
		// Two ramps multiply into a quadratic m = (t/1s)² on [0, 1 s].
		{"piecewise:0s=0,1s=1*piecewise:0s=0,1s=1", func(t float64) float64 {
			if t <= 1e3 {
				return t * t * t / 3e6
			}
			return 1e3/3 + (t - 1e3)
		}},
		{"sin:10m,1,3", sinTau(6e5, 1, 3)},
		{"sin:1s,0,2", sinTau(1e3, 0, 2)},
		{"sin:10m,1,3*const:2", func(t float64) float64 { return 2 * sinTau(6e5, 1, 3)(t) }},
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			t.Parallel()
			w := NewWarper(mustProfile(t, tt.profile))
			for _, ms := range []float64{0.5, 10, 999, 1000, 1001, 5e3, 1e4, 1.5e4, 3e5, 6e5, 3.6e6, 8.64e7} {
				want := tt.tau(ms)
				if got := w.TraceTime(ms); math.Abs(got-want) > 1e-9*want+1e-9 {
					t.Errorf("TraceTime(%g) = %.12g, want %.12g", ms, got, want)
				}
				// Where m is near 0 the inverse is ill-conditioned, so
				// it is held to its backward error: τ of the answer.
				if got := w.ReplayTime(want); math.Abs(tt.tau(got)-want) > 1e-12*want+1e-9 {
					t.Errorf("ReplayTime(%.12g) = %.12g, want %g", want, got, ms)
				}
			}
		})
	}
}

func TestWarpStepHalvesGaps(t *testing.T) {
	t.Parallel()
	w := NewWarper(mustProfile(t, "step:10s,2"))
	var prev float64
	for i := 1; i <= 20; i++ {
		at := w.ReplayTime(float64(i) * 1000) // one arrival a second of trace
		want := 1000.0
		if i > 10 {
			want = 500
		}
		if gap := at - prev; gap != want {
			t.Fatalf("gap before arrival %d: %gms, want %gms", i, gap, want)
		}
		prev = at
	}
}

// TestWarpSinAverageRate replays a constant-rate trace under sinusoids:
// over each whole period the arrivals number mean multiplier × base rate ×
// period, half of them in each (symmetric) half period.
func TestWarpSinAverageRate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		profile string
		period  float64
		mean    float64
		gap     float64 // ms of trace between arrivals
	}{
		{"sin:10m,1,3", 6e5, 2, 600},
		{"sin:1m,0,1", 6e4, 0.5, 30},
		{"sin:1m,0.5,1.5*const:4", 6e4, 4, 120},
		{"sin:1m,1,3*sin:30s,0.5,1.5", 6e4, 2, 60}, // the product's mean: 2·1 + cross terms that average 0
	}
	for _, tt := range tests {
		t.Run(tt.profile, func(t *testing.T) {
			t.Parallel()
			w := NewWarper(mustProfile(t, tt.profile))
			var arrivals []float64
			for tau := tt.gap; ; tau += tt.gap {
				at := w.ReplayTime(tau)
				if at >= 3*tt.period {
					break
				}
				arrivals = append(arrivals, at)
			}
			count := func(from, to float64) int {
				i, _ := slices.BinarySearch(arrivals, from)
				j, _ := slices.BinarySearch(arrivals, to)
				return j - i
			}
			want := tt.mean * tt.period / tt.gap
			for k := range 3 {
				start := float64(k) * tt.period
				if n := count(start, start+tt.period); math.Abs(float64(n)-want) > 1 {
					t.Errorf("period %v: %d arrivals, want %g (mean × base rate × period)", k, n, want)
				}
				if half := count(start, start+tt.period/2); math.Abs(float64(half)-want/2) > 1 {
					t.Errorf("period %v: %d arrivals in the first half, want %g", k, half, want/2)
				}
			}
			// The trough is quiet, the peak busy: a tenth of a period at
			// each.
			lo, hi := count(0, tt.period/20), count(tt.period*0.45, tt.period*0.55)
			if 2*lo >= hi {
				t.Errorf("%d arrivals around the trough, %d around the peak", lo, hi)
			}
		})
	}
}

func TestWarpMonotone(t *testing.T) {
	t.Parallel()
	profiles := []string{
		"const:3", "step:10s,2", "step:10s,0.1*step:20s,30",
		"piecewise:0s=1,10s=4,20s=0.5,30s=2", "piecewise:5s=0,6s=2,7s=0,8s=1",
		"sin:10s,0,3", "sin:10s,1,3*step:15s,3", "sin:7s,0,1*sin:3s,0.2,1",
		"sin:10s,1,2*piecewise:0s=1,25s=3", "sin:1s,0,1*piecewise:0s=0,2s=0,3s=1*step:4s,2",
	}
	for i, s := range profiles {
		t.Run(s, func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(1, uint64(i)))
			w := NewWarper(mustProfile(t, s))
			var taus []float64
			for range 2000 {
				taus = append(taus, rng.Float64()*1e5)
			}
			for _, r := range w.regions { // region boundaries and their neighbours
				for _, v := range []float64{r.tau0, r.tau1} {
					if !math.IsInf(v, 0) {
						taus = append(taus, v, math.Nextafter(v, 0), math.Nextafter(v, math.Inf(1)))
					}
				}
			}
			slices.Sort(taus)
			prev := 0.0
			for _, tau := range taus {
				at := w.ReplayTime(tau)
				if at < prev {
					t.Fatalf("ReplayTime(%.17g) = %.17g, before %.17g of an earlier trace time", tau, at, prev)
				}
				prev = at
				if back := w.TraceTime(at); math.Abs(back-tau) > 1e-9*tau+1e-9 {
					t.Fatalf("TraceTime(ReplayTime(%.17g)) = %.17g", tau, back)
				}
			}
		})
	}
}

func TestWarpZeroRate(t *testing.T) {
	t.Parallel()
	// Off for good from 10 s: nothing later in the trace is ever sent.
	w := NewWarper(mustProfile(t, "step:10s,0"))
	if got := w.ReplayTime(1e4); got != 1e4 {
		t.Errorf("ReplayTime(10s) = %g", got)
	}
	if got := w.ReplayTime(1e4 + 1e-6); !math.IsInf(got, 1) {
		t.Errorf("ReplayTime after the rate drops to 0 = %g, want +Inf", got)
	}
	if got := w.Offset(20 * time.Second); got != Never {
		t.Errorf("Offset after the rate drops to 0 = %v, want Never", got)
	}
	// A pause from 10 s to 20 s: the trace resumes where it stopped.
	w = NewWarper(mustProfile(t, "piecewise:0s=1,10s=1,10.001s=0,20s=0,20.001s=1"))
	for tau := 1.0; tau < 3e4; tau += 7 {
		if at := w.ReplayTime(tau); at > 10001 && at < 20000 {
			t.Fatalf("arrival at trace %g ms replayed at %g ms, inside the pause", tau, at)
		}
	}
	// τ(20.001 s) = 10 s + two half-ramps of 0.5 ms each.
	if got, want := w.ReplayTime(2e4), 2.0001e4+(2e4-10001); math.Abs(got-want) > 1e-6 {
		t.Errorf("ReplayTime(20s) = %.9g, want %.9g", got, want)
	}
	if got := Warp(mustProfile(t, "sin:1m,0,0"), 1); !math.IsInf(got, 1) {
		t.Errorf("an all-zero sinusoid replays trace time 1 ms at %g", got)
	}
}

func TestWarpRecords(t *testing.T) {
	t.Parallel()
	recs := []Record{{Line: 1, TimestampMs: 0}, {Line: 2, TimestampMs: 5000}, {Line: 3, TimestampMs: 15000}, {Line: 4, TimestampMs: 30000}}
	got := NewWarper(mustProfile(t, "step:10s,2*step:20s,0")).WarpRecords(recs)
	// 15 s of trace is 12.5 s of replay; the rate is 0 from 20 s of
	// replay, i.e. 30 s of trace on.
	want := []Record{{Line: 1, TimestampMs: 0}, {Line: 2, TimestampMs: 5000}, {Line: 3, TimestampMs: 12500}, {Line: 4, TimestampMs: 20000}}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i].Line != want[i].Line || got[i].TimestampMs != want[i].TimestampMs {
			t.Fatalf("record %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	recs = []Record{{TimestampMs: 1}, {TimestampMs: 40000}, {TimestampMs: 2}}
	if got := NewWarper(mustProfile(t, "step:10s,0")).WarpRecords(recs); len(got) != 2 || got[1].TimestampMs != 2 {
		t.Fatalf("unreached record not dropped: %+v", got)
	}
}

func TestReplayAtWithRate(t *testing.T) {
	t.Parallel()
	r := Replay{Speed: 2, Rate: NewWarper(mustProfile(t, "step:1s,2*step:3s,0"))}
	first := Record{TimestampMs: 100}
	tests := []struct {
		ts   float64
		want time.Duration
	}{
		{100, 0},
		{1100, 500 * time.Millisecond},  // 500 ms at speed 2, before the step
		{4100, 1500 * time.Millisecond}, // 2000 ms at speed 2: 1 s, then 1 s at double rate
		{10100, 3 * time.Second},        // 5000 ms: 1 s, then 4 s at double rate
		{10101, Never},                  // after the rate drops to 0
	}
	for _, tt := range tests {
		if got := r.At(Record{TimestampMs: tt.ts}, first); got != tt.want {
			t.Errorf("At(%g) = %v, want %v", tt.ts, got, tt.want)
		}
	}
}

func BenchmarkWarperReplayTime(b *testing.B) {
	for _, s := range []string{"step:20m,3", "sin:10m,1,3*step:20m,3", "sin:10m,1,3*piecewise:0s=1,1h=3"} {
		b.Run(s, func(b *testing.B) {
			w := NewWarper(mustProfile(b, s))
			tau := 0.0
			for b.Loop() {
				tau += 97
				w.ReplayTime(tau)
			}
		})
	}
}

// FuzzWarp checks the warp of any cheap profile: monotone, never before
// the start, and consistent with its own integral.
func FuzzWarp(f *testing.F) {
	for _, s := range []string{"step:10s,2", "sin:10s,0,3*step:15s,3", "piecewise:5s=0,6s=2,7s=0,8s=1*sin:3s,0.2,1", "step:1s,0"} {
		f.Add(s, 1000.0, 20000.0)
	}
	f.Fuzz(func(t *testing.T, s string, a, b float64) {
		p, err := ParseRateProfile(s)
		if err != nil || p.layout().cells > 4096 || math.IsNaN(a) || math.IsNaN(b) {
			return
		}
		a, b = min(math.Abs(a), 1e12), min(math.Abs(b), 1e12)
		if a > b {
			a, b = b, a
		}
		w := NewWarper(p)
		ta, tb := w.ReplayTime(a), w.ReplayTime(b)
		if !(ta >= 0) || !(tb >= ta) {
			t.Fatalf("%s: ReplayTime(%g) = %g, ReplayTime(%g) = %g", p, a, ta, b, tb)
		}
		if !math.IsInf(tb, 1) {
			// The answer is within 1 ps (bisection) of where τ reaches b.
			slack := 1e-9*b + 1e-9*(p.Multiplier(tb)+p.Multiplier(math.Max(tb-1e-9, 0))+1)
			if back := w.TraceTime(tb); math.Abs(back-b) > slack {
				t.Fatalf("%s: TraceTime(ReplayTime(%g)) = %g", p, b, back)
			}
		}
	})
}
