package policy

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"switchyard.dev/libs/kvtier"
)

// TierWeights are the overlap credit of one cached block per tier, indexed
// by kvtier.Tier. As a flag.Value it reads and prints one weight per tier,
// fastest first, comma-separated.
type TierWeights [kvtier.Count]float64

// DefaultTierWeights are the weights without -tier-weights: a block on the device needs no transfer; slower
// tiers save less of its prefill.
func DefaultTierWeights() TierWeights {
	return TierWeights{kvtier.Device: 1, kvtier.Host: 0.75, kvtier.Disk: 0.25, kvtier.External: 0.1}
}

// Credit returns the overlap credit of cumulative per-tier depths: each
// block counts with the weight of the fastest tier holding it.
func (w TierWeights) Credit(depth [kvtier.Count]int) float64 {
	credit, prev := 0.0, 0
	for t := range kvtier.Count {
		d := max(depth[t], prev)
		credit += w[t] * float64(d-prev)
		prev = d
	}
	return credit
}

// String formats w as Set reads it, e.g. "1,0.75,0.25,0.1".
func (w TierWeights) String() string {
	parts := make([]string, len(w))
	for t, x := range w {
		parts[t] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(parts, ",")
}

// Set parses one finite, non-negative weight per tier, fastest first,
// comma-separated. On error w is unchanged.
func (w *TierWeights) Set(s string) error {
	parts := strings.Split(s, ",")
	if len(parts) != len(w) {
		return fmt.Errorf("want %d comma-separated weights, one per tier, got %d", len(w), len(parts))
	}
	var out TierWeights
	for t, p := range parts {
		x, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
			return fmt.Errorf("bad %v weight %q: want a finite non-negative number", kvtier.Tier(t), p)
		}
		out[t] = x
	}
	*w = out
	return nil
}

// DeriveTierWeights credits a block in each tier with the share of its
// recompute that loading it saves: 1 − load/recompute, at least 0, where
// load[t] is the measured or configured time to load one block from tier
// t and recompute the time to prefill one. The device's blocks need no
// load and count fully; a tier with no load time keeps fallback's weight.
func DeriveTierWeights(load [kvtier.Count]time.Duration, recompute time.Duration, fallback TierWeights) TierWeights {
	w := fallback
	w[kvtier.Device] = 1
	if recompute <= 0 {
		return w
	}
	for t := kvtier.Host; int(t) < kvtier.Count; t++ {
		if load[t] > 0 {
			w[t] = max(0, 1-float64(load[t])/float64(recompute))
		}
	}
	return w
}
