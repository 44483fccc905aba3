package policy

import (
	"testing"
	"time"

	"switchyard.dev/libs/kvtier"
)

func TestDeriveTierWeights(t *testing.T) {
	t.Parallel()
	var load [kvtier.Count]time.Duration
	load[kvtier.Host] = 25 * time.Microsecond
	load[kvtier.Disk] = 300 * time.Microsecond // slower than recomputing
	fb := DefaultTierWeights()
	w := DeriveTierWeights(load, 100*time.Microsecond, fb)
	want := TierWeights{kvtier.Device: 1, kvtier.Host: 0.75, kvtier.Disk: 0, kvtier.External: fb[kvtier.External]}
	if w != want {
		t.Errorf("weights %v; want %v", w, want)
	}
	if w := DeriveTierWeights(load, 0, fb); w != fb {
		t.Errorf("without a recompute time: %v; want the fallback %v", w, fb)
	}
}
