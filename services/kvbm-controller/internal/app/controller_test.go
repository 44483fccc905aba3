package app

import (
	"testing"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	kvbmv1 "switchyard.dev/gen/switchyard/kvbm/v1"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/discovery/filedisc"
)

// ListPools lists one pool per tier each worker has, device first.
func TestListPoolsPerTier(t *testing.T) {
	t.Parallel()
	reg, err := filedisc.New(filedisc.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []discovery.Instance{
		{ID: "d0", Role: discovery.RoleDecode, Model: "m", Version: "1", Address: "127.0.0.1:1",
			Meta: map[string]string{discovery.MetaKVBlocks: "100", discovery.MetaBlockSize: "16", discovery.MetaKVHostBlocks: "400", discovery.MetaKVDiskBlocks: "1600"}},
		{ID: "p0", Role: discovery.RolePrefill, Model: "m", Version: "1", Address: "127.0.0.1:2",
			Meta: map[string]string{discovery.MetaKVBlocks: "50", discovery.MetaBlockSize: "16"}},
		{ID: "x0", Role: discovery.RoleDecode, Model: "other", Version: "1", Address: "127.0.0.1:3",
			Meta: map[string]string{discovery.MetaKVBlocks: "7", discovery.MetaBlockSize: "16"}},
	} {
		r, err := reg.Register(t.Context(), in)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Deregister(t.Context()) })
	}
	res, err := (&controller{reg: reg}).ListPools(t.Context(), connect.NewRequest(&kvbmv1.ListPoolsRequest{Model: "m"}))
	if err != nil {
		t.Fatal(err)
	}
	type pool struct {
		id   string
		tier commonv1.StorageTier
		cap  uint64
	}
	var got []pool
	for _, p := range res.Msg.GetPools() {
		got = append(got, pool{p.GetInstanceId(), p.GetTier(), p.GetCapacityBlocks()})
	}
	want := []pool{
		{"p0", commonv1.StorageTier_STORAGE_TIER_DEVICE, 50},
		{"d0", commonv1.StorageTier_STORAGE_TIER_DEVICE, 100},
		{"d0", commonv1.StorageTier_STORAGE_TIER_HOST, 400},
		{"d0", commonv1.StorageTier_STORAGE_TIER_DISK, 1600},
	}
	if len(got) != len(want) {
		t.Fatalf("pools %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("pools %v; want %v", got, want)
		}
	}
}
