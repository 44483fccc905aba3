package ingest

import (
	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/radix"
)

// tierOf maps the wire tier to the index tier; unspecified means device,
// as in vLLM, where an absent medium is GPU memory.
func tierOf(t commonv1.StorageTier) kvtier.Tier {
	switch t {
	case commonv1.StorageTier_STORAGE_TIER_HOST:
		return kvtier.Host
	case commonv1.StorageTier_STORAGE_TIER_DISK:
		return kvtier.Disk
	case commonv1.StorageTier_STORAGE_TIER_EXTERNAL:
		return kvtier.External
	}
	return kvtier.Device
}

// appendEvents converts wire events to index events, appending to dst.
func appendEvents(dst []radix.Event, evs []*workerv1.KvEvent) []radix.Event {
	for _, ev := range evs {
		switch e := ev.GetEvent().(type) {
		case *workerv1.KvEvent_Stored:
			s := e.Stored
			dst = append(dst, radix.Event{Kind: radix.Stored, Tier: tierOf(s.GetTier()), Hashes: s.GetBlockHashes(),
				Parent: s.GetParentHash(), HasParent: s.ParentHash != nil})
		case *workerv1.KvEvent_Removed:
			dst = append(dst, radix.RemovedEvent(tierOf(e.Removed.GetTier()), e.Removed.GetBlockHashes()...))
		case *workerv1.KvEvent_Cleared:
			dst = append(dst, radix.ClearedEvent())
		}
	}
	return dst
}

// dumpAcc turns a dump's first batch into the block list Reset takes (the
// later batches are applied as events).
type dumpAcc struct {
	masks map[uint64]kvtier.Mask
	order []uint64
}

func (d *dumpAcc) reset() {
	clear(d.masks)
	d.order = d.order[:0]
}

func (d *dumpAcc) add(evs []*workerv1.KvEvent) {
	if d.masks == nil {
		d.masks = map[uint64]kvtier.Mask{}
	}
	for _, ev := range evs {
		switch e := ev.GetEvent().(type) {
		case *workerv1.KvEvent_Stored:
			m := tierOf(e.Stored.GetTier()).Mask()
			for _, h := range e.Stored.GetBlockHashes() {
				if _, ok := d.masks[h]; !ok {
					d.order = append(d.order, h)
				}
				d.masks[h] |= m
			}
		case *workerv1.KvEvent_Removed:
			m := tierOf(e.Removed.GetTier()).Mask()
			for _, h := range e.Removed.GetBlockHashes() {
				if cur, ok := d.masks[h]; ok {
					d.masks[h] = cur &^ m
				}
			}
		case *workerv1.KvEvent_Cleared:
			d.reset()
		}
	}
}

func (d *dumpAcc) blocks() []radix.Block {
	out := make([]radix.Block, 0, len(d.order))
	for _, h := range d.order {
		if m := d.masks[h]; m != 0 {
			out = append(out, radix.Block{Hash: h, Tiers: m})
		}
	}
	return out
}
