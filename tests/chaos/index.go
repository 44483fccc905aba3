package chaos

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/gen/switchyard/router/v1/routerv1connect"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
)

// maxIndexHashes is the most block hashes GetWorkerIndex lists
// (services/router/internal/route).
const maxIndexHashes = 10000

// cacheView is one side's account of a worker's KV cache: the blocks per
// tier, and the last event batch it reflects.
type cacheView struct {
	seq    uint64
	tiers  map[string]int
	hashes []uint64 // every block hash, ascending, each once
}

func (v cacheView) String() string {
	return fmt.Sprintf("seq %d, %d blocks %v", v.seq, len(v.hashes), v.tiers)
}

var tierNames = map[commonv1.StorageTier]string{
	commonv1.StorageTier_STORAGE_TIER_UNSPECIFIED: "device", // the zero tier is the device's (libs/kvtier)
	commonv1.StorageTier_STORAGE_TIER_DEVICE:      "device",
	commonv1.StorageTier_STORAGE_TIER_HOST:        "host",
	commonv1.StorageTier_STORAGE_TIER_DISK:        "disk",
	commonv1.StorageTier_STORAGE_TIER_EXTERNAL:    "external",
}

// workerView asks the worker itself for a dump of its cache, as a router
// does when it first subscribes: the ground truth the index must match.
func workerView(ctx context.Context, hc *http.Client, addr string) (cacheView, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c := workerv1connect.NewWorkerServiceClient(hc, mesh.url(addr))
	st, err := c.SubscribeKvEvents(ctx, connect.NewRequest(&workerv1.SubscribeKvEventsRequest{Dump: true, OmitTokenIds: true}))
	if err != nil {
		return cacheView{}, err
	}
	defer st.Close()
	v := cacheView{tiers: map[string]int{}}
	set := map[uint64]bool{}
	for st.Receive() {
		m := st.Msg()
		if !m.GetDump() {
			return cacheView{}, fmt.Errorf("live batch %d before the dump completed", m.GetSequence())
		}
		v.seq = m.GetSequence()
		for _, e := range m.GetEvents() {
			s := e.GetStored()
			if s == nil {
				return cacheView{}, fmt.Errorf("dump carries a %T event", e.GetEvent())
			}
			v.tiers[tierNames[s.GetTier()]] += len(s.GetBlockHashes())
			for _, h := range s.GetBlockHashes() {
				set[h] = true
			}
		}
		if m.GetDumpComplete() {
			v.hashes = slices.Sorted(maps.Keys(set))
			return v, nil
		}
	}
	return cacheView{}, fmt.Errorf("dump ended early: %w", st.Err())
}

// routerView is what a router's index holds for the worker.
func routerView(ctx context.Context, hc *http.Client, addr, worker string) (cacheView, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := routerv1connect.NewRouterServiceClient(hc, mesh.url(addr))
	res, err := c.GetWorkerIndex(ctx, connect.NewRequest(&routerv1.GetWorkerIndexRequest{WorkerId: worker, Limit: maxIndexHashes}))
	if err != nil {
		return cacheView{}, false, err
	}
	m := res.Msg
	if !m.GetFound() {
		return cacheView{}, false, nil
	}
	v := cacheView{tiers: map[string]int{}, hashes: m.GetBlockHashes()}
	if m.GetNextSequence() > 0 {
		v.seq = m.GetNextSequence() - 1
	}
	for t, n := range m.GetBlocksPerTier() {
		if n > 0 {
			v.tiers[t] = int(n)
		}
	}
	if int(m.GetBlocks()) != len(v.hashes) && m.GetBlocks() <= maxIndexHashes {
		return v, true, fmt.Errorf("router reports %d blocks but lists %d", m.GetBlocks(), len(v.hashes))
	}
	return v, true, nil
}

// matches reports whether the router's view is the worker's: the same
// position in the worker's event stream, the same blocks in each tier.
func matches(w, r cacheView) bool {
	return w.seq == r.seq && slices.Equal(w.hashes, r.hashes) && maps.Equal(w.tiers, r.tiers)
}

// IndexCheck is the outcome of comparing every router with every worker.
type IndexCheck struct {
	Match      bool
	Mismatches []string
}

// CheckIndex compares each router's index of each worker with the
// worker's own dump, retrying for up to wait while events still flow (the
// load is stopped first, so the caches settle).
func CheckIndex(ctx context.Context, s *Stack, wait time.Duration) IndexCheck {
	hc := mesh.client(0)
	deadline := time.Now().Add(wait)
	for {
		var bad []string
		for _, w := range s.Workers() {
			wv, err := workerView(ctx, hc, w.Addr)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: dump: %v", w.Name, err))
				continue
			}
			for _, r := range s.Routers {
				rv, found, err := routerView(ctx, hc, r.Addr, w.Name)
				switch {
				case err != nil:
					bad = append(bad, fmt.Sprintf("%s on %s: %v", w.Name, r.Name, err))
				case !found:
					bad = append(bad, fmt.Sprintf("%s on %s: not in the index (worker: %v)", w.Name, r.Name, wv))
				case !matches(wv, rv):
					bad = append(bad, fmt.Sprintf("%s on %s: index %v, worker %v", w.Name, r.Name, rv, wv))
				}
			}
		}
		if len(bad) == 0 {
			return IndexCheck{Match: true}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return IndexCheck{Mismatches: bad}
		}
		time.Sleep(500 * time.Millisecond)
	}
}
