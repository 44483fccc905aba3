package kvtier_test

import (
	"testing"

	"switchyard.dev/libs/kvtier"
)

func TestTier(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tier  kvtier.Tier
		name  string
		valid bool
	}{
		{kvtier.Device, "device", true},
		{kvtier.Host, "host", true},
		{kvtier.Disk, "disk", true},
		{kvtier.External, "external", true},
		{kvtier.Tier(kvtier.Count), "tier(4)", false},
		{255, "tier(255)", false},
	} {
		if got := tc.tier.String(); got != tc.name {
			t.Errorf("Tier(%d).String() = %q; want %q", uint8(tc.tier), got, tc.name)
		}
		if got := tc.tier.Valid(); got != tc.valid {
			t.Errorf("Tier(%d).Valid() = %v; want %v", uint8(tc.tier), got, tc.valid)
		}
	}
	if kvtier.Tier(0) != kvtier.Device {
		t.Errorf("the zero Tier is %v; want device (vLLM's default medium)", kvtier.Tier(0))
	}
}

func TestMask(t *testing.T) {
	t.Parallel()
	m := kvtier.Device.Mask() | kvtier.Disk.Mask()
	for tier := range kvtier.Tier(kvtier.Count) {
		if want := tier == kvtier.Device || tier == kvtier.Disk; m.Has(tier) != want {
			t.Errorf("%08b.Has(%v) = %v; want %v", m, tier, !want, want)
		}
	}
	for _, tc := range []struct {
		m     kvtier.Mask
		valid bool
	}{
		{0, false},
		{m, true},
		{kvtier.All, true},
		{kvtier.All + 1, false},
		{kvtier.External.Mask() << 1, false},
	} {
		if got := tc.m.Valid(); got != tc.valid {
			t.Errorf("Mask(%08b).Valid() = %v; want %v", tc.m, got, tc.valid)
		}
	}
}
