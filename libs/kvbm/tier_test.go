package kvbm_test

import (
	"testing"

	"switchyard.dev/libs/kvbm"
	"switchyard.dev/libs/kvbm/tiertest"
)

func TestHostContract(t *testing.T) {
	t.Parallel()
	tiertest.Run(t, func(t *testing.T, cfg tiertest.Config) kvbm.Tier {
		h, err := kvbm.NewHost(kvbm.HostConfig{Blocks: cfg.Blocks, BlockBytes: cfg.BlockBytes, OnChange: cfg.OnChange})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		return h
	})
}

func TestDiskContract(t *testing.T) {
	t.Parallel()
	tiertest.Run(t, func(t *testing.T, cfg tiertest.Config) kvbm.Tier {
		d, err := kvbm.OpenDisk(kvbm.DiskConfig{Dir: t.TempDir(), Blocks: cfg.Blocks, BlockBytes: cfg.BlockBytes, OnChange: cfg.OnChange})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	})
}
