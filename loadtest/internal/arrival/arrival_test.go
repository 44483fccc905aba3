package arrival

import (
	"math"
	"testing"
	"time"

	"switchyard.dev/libs/mooncake"
)

func TestGapsStatistics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		process Process
		rate    float64
		wantCV  float64
	}{
		{name: "poisson 10/s", process: Poisson, rate: 10, wantCV: 1},
		{name: "poisson 0.5/s", process: Poisson, rate: 0.5, wantCV: 1},
		{name: "poisson 2000/s", process: Poisson, rate: 2000, wantCV: 1},
		{name: "constant 4/s", process: Constant, rate: 4, wantCV: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(tt.process, tt.rate, 42)
			if err != nil {
				t.Fatal(err)
			}
			const n = 50000
			var prev time.Duration
			var sum, sumSq float64
			if first := s.Next(); first != 0 {
				t.Fatalf("first arrival at %v, want 0", first)
			}
			for range n {
				at := s.Next()
				gap := (at - prev).Seconds()
				if gap < 0 {
					t.Fatalf("schedule went backwards: %v after %v", at, prev)
				}
				prev = at
				sum += gap
				sumSq += gap * gap
			}
			mean := sum / n
			std := math.Sqrt(sumSq/n - mean*mean)
			wantMean := 1 / tt.rate
			if math.Abs(mean-wantMean)/wantMean > 0.03 {
				t.Errorf("mean gap %.6fs, want %.6fs ±3%%", mean, wantMean)
			}
			if cv := std / mean; math.Abs(cv-tt.wantCV) > 0.03 {
				t.Errorf("coefficient of variation %.3f, want %.3f", cv, tt.wantCV)
			}
		})
	}
}

func TestPoissonCountsPerWindow(t *testing.T) {
	t.Parallel()
	// In a Poisson process the number of arrivals per unit window has
	// variance equal to its mean.
	s, err := New(Poisson, 20, 7)
	if err != nil {
		t.Fatal(err)
	}
	const windows = 2000
	counts := make([]float64, windows)
	for {
		at := s.Next()
		w := int(at / time.Second)
		if w >= windows {
			break
		}
		counts[w]++
	}
	var sum, sumSq float64
	for _, c := range counts {
		sum += c
		sumSq += c * c
	}
	mean := sum / windows
	variance := sumSq/windows - mean*mean
	if math.Abs(mean-20) > 0.5 || math.Abs(variance/mean-1) > 0.1 {
		t.Fatalf("per-second counts mean %.2f variance %.2f, want both ≈ 20", mean, variance)
	}
}

func TestSeeded(t *testing.T) {
	t.Parallel()
	a, _ := New(Poisson, 5, 1)
	b, _ := New(Poisson, 5, 1)
	c, _ := New(Poisson, 5, 2)
	same, differ := true, false
	for range 100 {
		x, y, z := a.Next(), b.Next(), c.Next()
		same = same && x == y
		differ = differ || x != z
	}
	if !same || !differ {
		t.Fatalf("same seed equal=%v, different seed differs=%v; want both true", same, differ)
	}
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		p    Process
		rate float64
	}{
		{Poisson, 0}, {Poisson, -1}, {"gamma", 1},
	}
	for _, tt := range tests {
		if _, err := New(tt.p, tt.rate, 1); err == nil {
			t.Errorf("New(%q, %g) succeeded, want error", tt.p, tt.rate)
		}
	}
}

func mustWarper(t *testing.T, profile string) *mooncake.Warper {
	t.Helper()
	p, err := mooncake.ParseRateProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	return mooncake.NewWarper(p)
}

func TestWarpedConstant(t *testing.T) {
	t.Parallel()
	s, err := NewWarped(Constant, 10, 1, mustWarper(t, "step:1s,2*step:2s,0"))
	if err != nil {
		t.Fatal(err)
	}
	// 100 ms gaps for 1 s, 50 ms gaps for the next, then nothing.
	var want []time.Duration
	for i := range 11 {
		want = append(want, time.Duration(i)*100*time.Millisecond)
	}
	for i := 1; i <= 20; i++ {
		want = append(want, time.Second+time.Duration(i)*50*time.Millisecond)
	}
	for i, w := range want {
		if got := s.Next(); got != w {
			t.Fatalf("arrival %d at %v, want %v", i, got, w)
		}
	}
	if got := s.Next(); got != mooncake.Never {
		t.Fatalf("arrival after the rate drops to 0 at %v, want Never", got)
	}
}

// TestWarpedPoissonIntensity folds 50 periods of a sinusoidal profile onto
// one and checks each second's arrivals against rate × ∫m over it.
func TestWarpedPoissonIntensity(t *testing.T) {
	t.Parallel()
	const rate, periods, period = 50.0, 50, 20 // period in s
	s, err := NewWarped(Poisson, rate, 3, mustWarper(t, "sin:20s,0.5,1.5"))
	if err != nil {
		t.Fatal(err)
	}
	var counts [period]float64
	for {
		at := s.Next()
		if at >= periods*period*time.Second {
			break
		}
		counts[int(at/time.Second)%period]++
	}
	for bin, n := range counts {
		// ∫ of 1 − 0.5·cos(2πt/20) over [bin, bin+1] seconds.
		a, b := float64(bin), float64(bin+1)
		integral := 1 - 0.5*period/(2*math.Pi)*(math.Sin(2*math.Pi*b/period)-math.Sin(2*math.Pi*a/period))
		want := rate * periods * integral
		if math.Abs(n-want) > 4*math.Sqrt(want) {
			t.Errorf("second %d of the period: %g arrivals, want %.0f ± %.0f", bin, n, want, 4*math.Sqrt(want))
		}
	}
}

func TestWarpedKeepsDraws(t *testing.T) {
	t.Parallel()
	flat, _ := New(Poisson, 5, 9)
	warped, _ := NewWarped(Poisson, 5, 9, mustWarper(t, "const:2"))
	for i := range 100 {
		f, w := flat.Next(), warped.Next()
		if d := f/2 - w; d < -1 || d > 1 { // rounded to the nanosecond
			t.Fatalf("arrival %d: %v flat, %v at double rate; want half", i, f, w)
		}
	}
}
