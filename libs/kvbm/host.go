package kvbm

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/nixl/arena"
)

// HostConfig sizes a host-memory tier.
type HostConfig struct {
	Blocks     int // slots
	BlockBytes int
	OnChange   OnChange // nil: changes are not reported
}

// Host is the host-memory tier (G2): one arena outside the Go heap, mapped
// and pre-faulted when the tier opens, so no block's first write pays for
// the kernel's first touch of its pages, and registrable with libs/nixl
// for transfers straight out of it. Host memory is trusted: blocks carry
// no checksum here (a block leaving this machine gets one, see Disk).
type Host struct {
	cfg   HostConfig
	arena *arena.Arena
	mem   []byte

	mu       sync.Mutex
	x        *slots
	pending  map[uint64]bool // blocks being written
	stats    Stats
	closed   bool
	inflight sync.WaitGroup // copies in or out of the arena
}

// NewHost maps and pre-faults a host tier of cfg.Blocks blocks.
func NewHost(cfg HostConfig) (*Host, error) {
	if cfg.Blocks <= 0 || cfg.BlockBytes <= 0 {
		return nil, fmt.Errorf("kvbm: host tier: %d blocks of %d bytes: both must be positive", cfg.Blocks, cfg.BlockBytes)
	}
	size := cfg.Blocks * cfg.BlockBytes
	if size/cfg.Blocks != cfg.BlockBytes {
		return nil, fmt.Errorf("kvbm: host tier: %d blocks of %d bytes overflow", cfg.Blocks, cfg.BlockBytes)
	}
	a, err := arena.Map(size)
	if err != nil {
		return nil, fmt.Errorf("kvbm: host tier: %w", err)
	}
	a.Prefault()
	return &Host{
		cfg: cfg, arena: a, mem: a.Bytes(), x: newSlots(cfg.Blocks), pending: map[uint64]bool{},
		stats: Stats{Tier: kvtier.Host, Capacity: cfg.Blocks, BlockBytes: cfg.BlockBytes},
	}, nil
}

// Kind is kvtier.Host.
func (h *Host) Kind() kvtier.Tier { return kvtier.Host }

// BlockBytes is the size of a block.
func (h *Host) BlockBytes() int { return h.cfg.BlockBytes }

// Arena is the tier's memory, for registering it with a transfer agent.
func (h *Host) Arena() []byte { return h.mem }

func (h *Host) block(i int32) []byte {
	off := int(i) * h.cfg.BlockBytes
	return h.mem[off : off+h.cfg.BlockBytes]
}

func (h *Host) emit(k ChangeKind, m Meta) {
	if h.cfg.OnChange != nil {
		h.cfg.OnChange(Change{Kind: k, Tier: kvtier.Host, Meta: m})
	}
}

// Put stores a block (see Tier).
func (h *Host) Put(_ context.Context, m Meta, data []byte) (bool, error) {
	if len(data) != h.cfg.BlockBytes {
		return false, fmt.Errorf("kvbm: host put %#x: %d bytes, want %d", m.Hash, len(data), h.cfg.BlockBytes)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return false, ErrClosed
	}
	if i, ok := h.x.live(m.Hash); ok || h.pending[m.Hash] {
		if ok {
			h.x.touch(i)
		}
		h.stats.Dedups++
		h.mu.Unlock()
		return false, nil
	}
	i, evicted, ok := h.x.reserve()
	if !ok {
		h.mu.Unlock()
		return false, ErrFull
	}
	if evicted != nil {
		h.stats.Evictions++
		h.emit(Removed, *evicted)
	}
	h.pending[m.Hash] = true
	h.inflight.Add(1)
	h.mu.Unlock()

	copy(h.block(i), data)

	h.mu.Lock()
	defer h.mu.Unlock()
	h.inflight.Done()
	delete(h.pending, m.Hash)
	m.Tokens = slices.Clone(m.Tokens)
	h.x.publish(i, m)
	h.stats.Puts++
	h.stats.BytesIn += uint64(len(data))
	h.emit(Stored, m)
	return true, nil
}

// Get copies a block out (see Tier).
func (h *Host) Get(_ context.Context, hash uint64, dst []byte) (Meta, error) {
	if len(dst) != h.cfg.BlockBytes {
		return Meta{}, fmt.Errorf("kvbm: host get %#x: %d bytes, want %d", hash, len(dst), h.cfg.BlockBytes)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return Meta{}, ErrClosed
	}
	i, ok := h.x.live(hash)
	if !ok {
		h.stats.Misses++
		h.mu.Unlock()
		return Meta{}, ErrNotFound
	}
	h.x.pin(i)
	m := h.x.s[i].meta
	h.inflight.Add(1)
	h.mu.Unlock()

	copy(dst, h.block(i))

	h.mu.Lock()
	defer h.mu.Unlock()
	h.inflight.Done()
	h.x.unpin(i)
	h.stats.Hits++
	h.stats.BytesOut += uint64(len(dst))
	m.Tokens = slices.Clone(m.Tokens)
	return m, nil
}

// Prefix counts the leading hashes held.
func (h *Host) Prefix(hashes []uint64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for n, hash := range hashes {
		if _, ok := h.x.live(hash); !ok {
			return n
		}
	}
	return len(hashes)
}

// Blocks lists the advertised blocks.
func (h *Host) Blocks() []Meta {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.x.metas()
}

// Stats returns occupancy and traffic.
func (h *Host) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.stats
	s.Blocks = len(h.x.index)
	return s
}

// Close waits for the copies in progress and unmaps the arena; its blocks
// are gone (host memory does not outlive the process).
func (h *Host) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	h.inflight.Wait()
	return h.arena.Close()
}
