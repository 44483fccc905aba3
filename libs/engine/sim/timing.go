package sim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"switchyard.dev/libs/engine/executor"
)

// Timing says how long a step takes on the simulated hardware.
type Timing interface {
	StepTime(b *executor.Batch) time.Duration
}

// Polynomial is the default timing model. For a step that computes n
// uncached prompt tokens and d single-token decodes, with KV usage
// u = used/total blocks:
//
//	prefill_ms(n) = 1.25e-6*n^2 + 7.41e-2*n + 26.2           (Dynamo mocker)
//	decode_ms(u)  = 5.74 + 54.01*u - 25.74*u^2               (grows with KV usage)
//	step_ms       = [n > 0]*prefill_ms(n) + [d > 0]*decode_ms(u)
//
// decode_ms rises monotonically from 5.74 ms on an empty cache to 34.0 ms
// on a full one: decode is memory-bound, so its cost follows the KV bytes
// read each step rather than the number of sequences.
type Polynomial struct{}

// PrefillMS is prefill_ms(n).
func PrefillMS(n int) float64 {
	x := float64(n)
	return 1.25e-6*x*x + 7.41e-2*x + 26.2
}

// DecodeMS is decode_ms(u).
func DecodeMS(u float64) float64 { return 5.74 + 54.01*u - 25.74*u*u }

// StepTime implements Timing.
func (Polynomial) StepTime(b *executor.Batch) time.Duration {
	var ms float64
	if b.PrefillTokens > 0 {
		ms += PrefillMS(b.PrefillTokens)
	}
	if b.DecodeTokens > 0 {
		ms += DecodeMS(usage(b))
	}
	return time.Duration(ms * float64(time.Millisecond))
}

func usage(b *executor.Batch) float64 {
	if b.TotalBlocks == 0 {
		return 0
	}
	return float64(b.UsedBlocks) / float64(b.TotalBlocks)
}

// Point is one measurement: X is prompt tokens (prefill) or KV usage in
// [0, 1] (decode), MS the step time.
type Point struct {
	X  float64 `json:"x"`
	MS float64 `json:"ms"`
}

// Profile interpolates measured step times linearly (extrapolating the
// end segments, never below zero). JSON form:
//
//	{"prefill": [{"x": 128, "ms": 35.1}, ...], "decode": [{"x": 0.1, "ms": 9.8}, ...]}
type Profile struct {
	Prefill []Point `json:"prefill"`
	Decode  []Point `json:"decode"`
}

// ParseProfile decodes and validates a profile.
func ParseProfile(data []byte) (*Profile, error) {
	var p Profile
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("sim: profile: %w", err)
	}
	for name, pts := range map[string][]Point{"prefill": p.Prefill, "decode": p.Decode} {
		if len(pts) == 0 {
			return nil, fmt.Errorf("sim: profile: no %s points", name)
		}
		for _, pt := range pts {
			if bad(pt.X) || bad(pt.MS) || pt.MS < 0 {
				return nil, fmt.Errorf("sim: profile: %s point %+v is not a finite, non-negative time", name, pt)
			}
		}
		slices.SortFunc(pts, func(a, b Point) int { return cmp.Compare(a.X, b.X) })
	}
	return &p, nil
}

// LoadProfile reads a profile file.
func LoadProfile(path string) (*Profile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	p, err := ParseProfile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// StepTime implements Timing.
func (p *Profile) StepTime(b *executor.Batch) time.Duration {
	var ms float64
	if b.PrefillTokens > 0 {
		ms += interp(p.Prefill, float64(b.PrefillTokens))
	}
	if b.DecodeTokens > 0 {
		ms += interp(p.Decode, usage(b))
	}
	return time.Duration(ms * float64(time.Millisecond))
}

func interp(pts []Point, x float64) float64 {
	if len(pts) == 1 {
		return pts[0].MS
	}
	i, _ := slices.BinarySearchFunc(pts, x, func(p Point, x float64) int { return cmp.Compare(p.X, x) })
	i = min(max(i, 1), len(pts)-1)
	a, b := pts[i-1], pts[i]
	if b.X == a.X {
		return b.MS
	}
	return max(0, a.MS+(b.MS-a.MS)*(x-a.X)/(b.X-a.X))
}

func bad(f float64) bool { return math.IsNaN(f) || math.IsInf(f, 0) }
