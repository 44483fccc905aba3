package worker

import (
	"testing"
	"time"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/kvtier"
)

func TestTierTimesMoved(t *testing.T) {
	t.Parallel()
	m := engine.Metrics{Tiers: []engine.TierMetrics{
		{Tier: kvtier.Host, LoadNanosPerBlk: 1000, RecomputeNanosPerBlk: 50000},
		{Tier: kvtier.Disk}, // not measured yet
	}}
	a := measuredTierTimes(m)
	if a.load[kvtier.Host] != time.Microsecond || a.load[kvtier.Disk] != 0 || a.prefill != 50*time.Microsecond {
		t.Fatalf("measured %+v", a)
	}
	for _, tt := range []struct {
		name string
		next tierTimes
		want bool
	}{
		{"same", a, false},
		{"within 10%", tierTimes{load: kvtier.Times{kvtier.Host: 1050}, prefill: 52 * time.Microsecond}, false},
		{"moved", tierTimes{load: kvtier.Times{kvtier.Host: 1500}, prefill: 50 * time.Microsecond}, true},
		{"new tier", tierTimes{load: kvtier.Times{kvtier.Host: 1000, kvtier.Disk: 9000}, prefill: 50 * time.Microsecond}, true},
		{"prefill moved", tierTimes{load: a.load, prefill: 80 * time.Microsecond}, true},
	} {
		if got := tt.next.movedFrom(a); got != tt.want {
			t.Errorf("%s: moved %t, want %t", tt.name, got, tt.want)
		}
	}
	if !a.movedFrom(tierTimes{}) {
		t.Error("a first measurement is not published")
	}
}
