package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"testing"
	"time"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/meshtest"
	"switchyard.dev/libs/worker"
)

// Real workers with host and disk tiers under a small device pool: after
// their caches churn through every tier, the router's index equals each
// worker's own dump, tier for tier, with zero mismatches.
func TestIndexEqualsTieredWorkers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	type tiered struct {
		id     string
		client workerv1connect.WorkerServiceClient
	}
	var workers []tiered
	for i := range 2 {
		id := fmt.Sprintf("tiered-%d", i)
		r := meshtest.Start(t, worker.Spec("decode", "v0.0.0-test", "127.0.0.1:0"),
			"-listen", "127.0.0.1:0", "-discovery", "file", "-discovery-dir", dir, "-id", id,
			"-num-blocks", "12", "-kv-host-blocks", "6", "-kv-disk-dir", t.TempDir(), "-kv-disk-blocks", "40")
		workers = append(workers, tiered{id, workerv1connect.NewWorkerServiceClient(http.DefaultClient, r.URL())})
	}
	_, st := (&cluster{dir: dir}).startRouter(t, "-block-size", "16")
	for n := range 12 {
		for i, w := range workers {
			prompt := make([]uint32, 40+n*7%30)
			for j := range prompt {
				prompt[j] = uint32(3 + (j*5+n*11+i)%200)
			}
			generate(t, w.client, prompt)
		}
	}
	for _, w := range workers {
		// Offloads may still be landing: compare with a fresh dump each time.
		var got, want map[uint64]kvtier.Mask
		deptest.Eventually(t, 30*time.Second, w.id+"'s blocks in the router's index", func() bool {
			want = workerDump(t, w.client)
			got = map[uint64]kvtier.Mask{}
			for _, b := range st.index.Dump()[w.id].Blocks {
				got[b.Hash] = b.Tiers
			}
			return maps.Equal(got, want)
		})
		tiers := map[kvtier.Tier]int{}
		for _, m := range want {
			for tier := range kvtier.Count {
				if m.Has(kvtier.Tier(tier)) {
					tiers[kvtier.Tier(tier)]++
				}
			}
		}
		if tiers[kvtier.Host] == 0 || tiers[kvtier.Disk] == 0 {
			t.Fatalf("%s holds %v blocks per tier; the test needs every tier in use", w.id, tiers)
		}
	}
}

func generate(t *testing.T, c workerv1connect.WorkerServiceClient, prompt []uint32) {
	t.Helper()
	st, err := c.Generate(t.Context(), connect.NewRequest(&workerv1.GenerateRequest{RequestId: fmt.Sprint(prompt[:3]),
		Model: "tiny-random", TokenIds: prompt, Stop: &commonv1.StopConditions{MaxTokens: 4, IgnoreEos: true}}))
	if err != nil {
		t.Fatal(err)
	}
	for st.Receive() {
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
}

// workerDump reads a worker's dump: every block it holds and the tiers
// holding it.
func workerDump(t *testing.T, c workerv1connect.WorkerServiceClient) map[uint64]kvtier.Mask {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := c.SubscribeKvEvents(ctx, connect.NewRequest(&workerv1.SubscribeKvEventsRequest{Dump: true, OmitTokenIds: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	out := map[uint64]kvtier.Mask{}
	for st.Receive() {
		m := st.Msg()
		for _, ev := range m.GetEvents() {
			if s := ev.GetStored(); s != nil {
				tier, ok := wireTiers[s.GetTier()]
				if !ok {
					t.Fatalf("dump event in tier %v", s.GetTier())
				}
				for _, h := range s.GetBlockHashes() {
					out[h] |= tier.Mask()
				}
			}
		}
		if m.GetDumpComplete() {
			return out
		}
	}
	t.Fatal(errors.Join(errors.New("dump stream ended early"), st.Err()))
	return nil
}

// wireTiers reads the wire's tier enum, independently of the router's own
// conversion under test.
var wireTiers = map[commonv1.StorageTier]kvtier.Tier{
	commonv1.StorageTier_STORAGE_TIER_DEVICE: kvtier.Device,
	commonv1.StorageTier_STORAGE_TIER_HOST:   kvtier.Host,
	commonv1.StorageTier_STORAGE_TIER_DISK:   kvtier.Disk,
}
