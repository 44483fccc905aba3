package rehash

import (
	"cmp"
	"slices"

	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/vllmevents"
)

// storedLocked re-hashes one stored chain. Blocks that become cached in
// their tier are announced in runs: consecutive announced blocks share
// one Stored event, whose parent is the block before the run.
func (r *Rehasher) storedLocked(seq uint64, s *vllmevents.Stored) {
	bs := r.cfg.BlockSize
	switch {
	case len(s.Hashes) == 0 || len(s.TokenIDs) != len(s.Hashes)*bs:
		r.drop("malformed", &r.stats.Malformed, seq, s)
		return
	case (s.HasLoraID && s.LoraID != 0) || s.LoraName != "":
		r.drop("lora", &r.stats.LoRA, seq, s)
		return
	case s.HasExtraKeys:
		r.drop("extra_keys", &r.stats.ExtraKeys, seq, s)
		return
	}
	parent, depth := kvhash.Root, 0
	if s.HasParent {
		p, ok := r.engine[s.Parent]
		if !ok {
			r.drop("unknown_parent", &r.stats.UnknownParent, seq, s)
			return
		}
		parent, depth = p.ours, r.ours[p.ours].depth+1
	}
	t := s.Tier
	run := -1 // index in r.out of the Stored event the previous block joined
	for i, h := range s.Hashes {
		tokens := s.TokenIDs[i*bs : (i+1)*bs]
		ours := kvhash.Chain(parent, tokens, 0)
		eb := r.engine[h]
		switch {
		case eb == nil:
			eb = &engineBlock{ours: ours}
			r.engine[h] = eb
		case eb.ours != ours:
			// The engine reuses a name for other tokens (it restarted
			// with a new hash seed and no gap showed): the old block is
			// gone.
			r.releaseLocked(eb)
			eb.refs, eb.ours = tierRefs{}, ours
		}
		eb.refs[t]++
		r.stats.StoredBlocks++
		ob := r.ours[ours]
		if ob == nil {
			ob = &ourBlock{parent: parent, depth: depth, tokens: slices.Clone(tokens)}
			r.ours[ours] = ob
		}
		ob.refs[t]++
		if ob.refs[t] == 1 {
			if run < 0 {
				r.out = append(r.out, kvevent.Event{Kind: kvevent.Stored, ParentHash: parent, BlockSize: bs, Tier: t})
				run = len(r.out) - 1
			}
			e := &r.out[run]
			e.BlockHashes = append(e.BlockHashes, ours)
			e.TokenIDs = append(e.TokenIDs, tokens...)
		} else {
			run = -1
		}
		parent = ours
		depth++
	}
}

// removedLocked applies one removed event.
func (r *Rehasher) removedLocked(rm *vllmevents.Removed) {
	t := rm.Tier
	for _, h := range rm.Hashes {
		eb := r.engine[h]
		if eb == nil || eb.refs[t] == 0 {
			r.stats.UnknownRemoved++
			continue
		}
		r.stats.RemovedBlocks++
		eb.refs[t]--
		r.unrefLocked(eb.ours, t, 1)
		if eb.refs.zero() {
			delete(r.engine, h)
		}
	}
}

// releaseLocked drops every store of an engine block.
func (r *Rehasher) releaseLocked(eb *engineBlock) {
	for t, n := range eb.refs {
		if n > 0 {
			r.unrefLocked(eb.ours, kvtier.Tier(t), n)
		}
	}
}

// unrefLocked drops n stores of our block in tier t, announcing its
// removal from the tier when none is left.
func (r *Rehasher) unrefLocked(ours uint64, t kvtier.Tier, n int32) {
	ob := r.ours[ours]
	ob.refs[t] -= n
	if ob.refs[t] > 0 {
		return
	}
	if k := len(r.out) - 1; k >= 0 && r.out[k].Kind == kvevent.Removed && r.out[k].Tier == t {
		r.out[k].BlockHashes = append(r.out[k].BlockHashes, ours)
	} else {
		r.out = append(r.out, kvevent.Event{Kind: kvevent.Removed, BlockHashes: []uint64{ours}, Tier: t})
	}
	if ob.refs.zero() {
		delete(r.ours, ours)
	}
}

// Dump returns a Stored event for every held block and tier, parents
// before children (by depth, then hash), numbered with the sequence of the
// latest journal batch it reflects: subscribe after that number to
// continue gap-free.
func (r *Rehasher) Dump() kvevent.Batch {
	r.mu.Lock()
	defer r.mu.Unlock()
	hashes := make([]uint64, 0, len(r.ours))
	for h := range r.ours {
		hashes = append(hashes, h)
	}
	slices.SortFunc(hashes, func(a, b uint64) int {
		return cmp.Or(cmp.Compare(r.ours[a].depth, r.ours[b].depth), cmp.Compare(a, b))
	})
	events := make([]kvevent.Event, 0, len(hashes))
	for _, h := range hashes {
		ob := r.ours[h]
		for t, n := range ob.refs {
			if n > 0 {
				events = append(events, kvevent.Event{Kind: kvevent.Stored, BlockHashes: []uint64{h}, ParentHash: ob.parent,
					TokenIDs: slices.Clone(ob.tokens), BlockSize: r.cfg.BlockSize, Tier: kvtier.Tier(t)})
			}
		}
	}
	return kvevent.Batch{Seq: r.journal.Last(), Events: events}
}
