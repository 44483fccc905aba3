package backoff_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"switchyard.dev/libs/mesh/backoff"
)

// top draws the largest value allowed: every wait is its ceiling.
type top struct{}

func (top) Int64N(n int64) int64 { return n - 1 }

// bottom draws zero.
type bottom struct{}

func (bottom) Int64N(int64) int64 { return 0 }

func TestCeiling(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name string
		p    backoff.Policy
		n    int
		want time.Duration
	}{
		{"first", backoff.Policy{Base: 100 * ms, Max: 10 * time.Second}, 1, 100 * ms},
		{"second doubles", backoff.Policy{Base: 100 * ms, Max: 10 * time.Second}, 2, 200 * ms},
		{"fourth", backoff.Policy{Base: 100 * ms, Max: 10 * time.Second}, 4, 800 * ms},
		{"capped", backoff.Policy{Base: 100 * ms, Max: 10 * time.Second}, 8, 10 * time.Second},
		{"capped far out", backoff.Policy{Base: 100 * ms, Max: 10 * time.Second}, 1000, 10 * time.Second},
		{"no overflow at the largest count", backoff.Policy{Base: 100 * ms, Max: 10 * time.Second}, math.MaxInt, 10 * time.Second},
		{"no overflow of a huge base", backoff.Policy{Base: math.MaxInt64 / 4, Max: math.MaxInt64}, 40, math.MaxInt64},
		{"zero count is the first", backoff.Policy{Base: 100 * ms, Max: time.Second}, 0, 100 * ms},
		{"negative count is the first", backoff.Policy{Base: 100 * ms, Max: time.Second}, -3, 100 * ms},
		{"max below base means base", backoff.Policy{Base: 250 * ms, Max: 100 * ms}, 5, 250 * ms},
		{"no max means base", backoff.Policy{Base: 250 * ms}, 5, 250 * ms},
		{"no base, no wait", backoff.Policy{Max: time.Second}, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := tt.p.Ceiling(tt.n); got != tt.want {
				t.Errorf("%+v.Ceiling(%d) = %v, want %v", tt.p, tt.n, got, tt.want)
			}
		})
	}
}

// Every wait lies in [0, Ceiling(n)], and the extremes of the source map
// to the ends of that range.
func TestDelayBounds(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Base: 50 * time.Millisecond, Max: 5 * time.Second}
	r := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 20; n++ {
		c := p.Ceiling(n)
		for range 200 {
			if d := p.Delay(n, r); d < 0 || d > c {
				t.Fatalf("Delay(%d) = %v, outside [0, %v]", n, d, c)
			}
		}
		if d := p.Delay(n, top{}); d != c {
			t.Errorf("Delay(%d) with the top draw = %v, want the ceiling %v", n, d, c)
		}
		if d := p.Delay(n, bottom{}); d != 0 {
			t.Errorf("Delay(%d) with the bottom draw = %v, want 0", n, d)
		}
	}
	if d := (backoff.Policy{}).Delay(3, r); d != 0 {
		t.Errorf("zero policy waited %v", d)
	}
	// The process-wide generator keeps the bounds too.
	for range 100 {
		if d := p.Delay(3, nil); d < 0 || d > p.Ceiling(3) {
			t.Fatalf("Delay(3, nil) = %v, outside [0, %v]", d, p.Ceiling(3))
		}
	}
}

// The waits spread over the whole window, not around one point: many
// loops that fail together retry apart.
func TestDelaySpread(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Base: 100 * time.Millisecond, Max: 10 * time.Second}
	r := rand.New(rand.NewPCG(7, 11))
	const n, draws, buckets = 5, 10000, 10
	c := p.Ceiling(n)
	var hist [buckets]int
	var sum float64
	for range draws {
		d := p.Delay(n, r)
		sum += float64(d)
		hist[min(int(int64(d)*buckets/int64(c)), buckets-1)]++
	}
	// Uniform: each tenth of the window gets about a tenth of the draws.
	for i, got := range hist {
		if got < draws/buckets*8/10 || got > draws/buckets*12/10 {
			t.Errorf("bucket %d of %d got %d of %d draws; want about %d", i, buckets, got, draws, draws/buckets)
		}
	}
	if mean := sum / draws / float64(c); mean < 0.45 || mean > 0.55 {
		t.Errorf("mean wait %.3f of the ceiling; want about 0.5", mean)
	}
}

// Next walks the ceilings up to the cap; Reset starts again from the
// first; Failures counts between them.
func TestBackoffNextReset(t *testing.T) {
	t.Parallel()
	b := backoff.New(backoff.Policy{Base: time.Second, Max: 4 * time.Second}, top{})
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}
	for i, w := range want {
		if got := b.Next(); got != w {
			t.Errorf("wait %d = %v, want %v", i+1, got, w)
		}
	}
	if got := b.Failures(); got != len(want) {
		t.Errorf("Failures() = %d, want %d", got, len(want))
	}
	b.Reset()
	if got := b.Failures(); got != 0 {
		t.Errorf("Failures() after Reset = %d, want 0", got)
	}
	if got := b.Next(); got != time.Second {
		t.Errorf("first wait after Reset = %v, want %v", got, time.Second)
	}
}

// Two Backoffs seeded alike draw alike: a test can replay a loop's waits.
func TestBackoffSeeded(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Base: 10 * time.Millisecond, Max: time.Second}
	a := backoff.New(p, rand.New(rand.NewPCG(3, 4)))
	b := backoff.New(p, rand.New(rand.NewPCG(3, 4)))
	for i := range 30 {
		if x, y := a.Next(), b.Next(); x != y {
			t.Fatalf("draw %d: %v and %v from the same seed", i, x, y)
		}
	}
}

func TestWaitAndSleep(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := backoff.New(backoff.Policy{Base: time.Second, Max: time.Minute}, top{})
		start := time.Now()
		for range 2 {
			if !b.Wait(t.Context()) {
				t.Fatal("Wait with a live context reported it done")
			}
		}
		if got := time.Since(start); got != 3*time.Second {
			t.Errorf("two waits took %v, want 1s + 2s", got)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if b.Wait(ctx) {
			t.Error("Wait with a cancelled context reported it live")
		}
		if backoff.Sleep(ctx, 0) {
			t.Error("Sleep(0) with a cancelled context reported it live")
		}
		if !backoff.Sleep(t.Context(), 0) {
			t.Error("Sleep(0) with a live context reported it done")
		}
		if time.Since(start) != 3*time.Second {
			t.Error("waits on a cancelled context took time")
		}
	})
}

func TestLogWorthy(t *testing.T) {
	t.Parallel()
	var logged []int
	for n := 1; n <= 30; n++ {
		if backoff.LogWorthy(n) {
			logged = append(logged, n)
		}
	}
	if want := []int{1, 10, 20, 30}; !slices.Equal(logged, want) {
		t.Errorf("logged failures %v, want %v", logged, want)
	}
}
