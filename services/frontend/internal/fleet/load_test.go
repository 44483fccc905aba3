package fleet

import (
	"testing"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/mesh/discovery"
)

// A worker's own report of its tiers wins; from a worker that reports
// only its pool, the lower tiers show their capacity from discovery.
func TestLoadOfTiers(t *testing.T) {
	t.Parallel()
	meta := map[string]string{discovery.MetaKVHostBlocks: "16", discovery.MetaKVSharedBlocks: "100"}
	reported := loadOf(&workerv1.GetLoadResponse{KvBlocksUsed: 3, KvBlocksTotal: 8, KvTiers: []*workerv1.KvTierLoad{
		{Tier: "host", BlocksUsed: 5, BlocksCapacity: 16}, {Tier: "external", BlocksUsed: 40, BlocksCapacity: 100},
	}}, meta)
	want := []struct {
		name        string
		used, total uint32
	}{{"device", 3, 8}, {"host", 5, 16}, {"shared", 40, 100}}
	if len(reported.KV) != len(want) {
		t.Fatalf("tiers %+v", reported.KV)
	}
	for i, w := range want {
		if g := reported.KV[i]; g.Name != w.name || g.Used == nil || *g.Used != w.used || g.Total != w.total {
			t.Errorf("tier %d: %+v; want %+v", i, g, w)
		}
	}
	old := loadOf(&workerv1.GetLoadResponse{KvBlocksUsed: 3, KvBlocksTotal: 8}, meta)
	if len(old.KV) != 3 || old.KV[1].Name != "host" || old.KV[1].Used != nil || old.KV[1].Total != 16 || old.KV[2].Name != "shared" {
		t.Errorf("an older worker's tiers: %+v", old.KV)
	}
}
