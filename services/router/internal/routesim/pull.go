package routesim

import (
	"container/heap"
	"fmt"
	"time"

	"switchyard.dev/libs/engine/sched"
	"switchyard.dev/libs/kvhash"
)

// pull is a prefix pull in flight: blocks copied from a peer into the
// worker a request was routed to, as a worker's disagg.Decoder does on a
// RouteResponse.prefix_source, or, with src -1, from the worker's own
// lower tiers (tiers.go). The request waits in its worker's queue, in its
// place (sched.Seq.Ready), until the copy lands.
type pull struct {
	id       int // request index: orders landings at one instant
	dst, src int
	seq      *sched.Seq
	ready    chan struct{}
	parent   uint64
	hashes   []uint64 // the blocks copied
	tokens   []uint32 // their tokens
	blocks   []int    // reserved on dst
	srcPins  []int    // the copied blocks on src, pinned while read
	dstPins  []int    // dst's own leading blocks, pinned meanwhile
	duration time.Duration
}

// startPull starts copying the leading blocks of seq's prompt that worker
// srcName holds (up to holds of them, as the router saw) and dst lacks.
// Like the live decoder it never copies the block with the last prompt
// token, and it copies only what the source still holds.
func (s *replay) startPull(seq *sched.Seq, dst int, srcName string, holds int) error {
	src, ok := s.pos[srcName]
	if !ok {
		return fmt.Errorf("prefix source %q is not a worker", srcName)
	}
	dk, sk := s.workers[dst].kv, s.workers[src].kv
	bs := dk.BlockSize()
	n := min((len(seq.Tokens)-1)/bs, holds)
	if n <= 0 || src == dst {
		return nil
	}
	// The sequence's own hashes, cached for the scheduler's admission too.
	hashes := seq.BlockHashes(bs)[:n]
	k, _ := dk.Probe(hashes)
	if k >= n {
		return nil
	}
	got, _ := sk.Probe(hashes[k:])
	if got == 0 {
		return nil
	}
	p := &pull{id: int(seq.ID), dst: dst, src: src, seq: seq, ready: make(chan struct{}),
		parent: kvhash.Root, hashes: hashes[k : k+got], tokens: seq.Tokens[k*bs : (k+got)*bs]}
	if k > 0 {
		p.parent = hashes[k-1]
	}
	var err error
	if p.srcPins, err = sk.Acquire(p.hashes); err != nil {
		return fmt.Errorf("pinning the source's blocks: %w", err)
	}
	if p.dstPins, err = dk.Acquire(hashes[:k]); err != nil {
		sk.Release(p.srcPins)
		return fmt.Errorf("pinning the destination's blocks: %w", err)
	}
	regs, err := dk.AllocateForImport(got)
	if err != nil {
		// No room to copy into: prefill locally, as the decoder does.
		sk.Release(p.srcPins)
		dk.Release(p.dstPins)
		return nil //nolint:nilerr // not a failure: the request prefills locally
	}
	for _, r := range regs {
		p.blocks = append(p.blocks, r.Block)
	}
	p.duration = time.Duration(got) * s.cfg.PullBlockTime
	seq.Ready = p.ready
	s.res.Pulls++
	s.res.PulledBlocks += got
	s.res.Requests[p.id-1].PulledBlocks = got
	heap.Push(&s.events, event{at: s.now + p.duration, worker: dst, land: p})
	return nil
}

// land commits a pull's blocks on its worker, lets its request be
// admitted, and releases every reference the pull held: the committed
// blocks stay cached, the most recently used, until the request takes them.
func (s *replay) land(p *pull) error {
	dk := s.workers[p.dst].kv
	if p.src >= 0 {
		s.workers[p.src].kv.Release(p.srcPins)
	}
	held, err := dk.CommitImported(p.blocks, p.parent, p.hashes, p.tokens)
	if err != nil {
		return fmt.Errorf("routesim: committing a pull: %w", err)
	}
	dk.Release(held)
	dk.Release(p.dstPins)
	close(p.ready)
	if err := s.applyEvents(s.workers[p.dst]); err != nil { // the committed blocks
		return err
	}
	if err := s.offload(s.workers[p.dst]); err != nil {
		return err
	}
	if err := s.startStep(p.dst); err != nil {
		return err
	}
	if p.src < 0 { // loaded from the worker's own tiers
		return nil
	}
	// The source may have gone idle for want of the blocks it had pinned.
	return s.startStep(p.src)
}
