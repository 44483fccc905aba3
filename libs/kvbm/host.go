package kvbm

import (
	"context"
	"fmt"

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
	*store
	cfg   HostConfig
	arena *arena.Arena
	mem   []byte
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
	return &Host{store: newStore(kvtier.Host, cfg.Blocks, cfg.BlockBytes, cfg.OnChange), cfg: cfg, arena: a, mem: a.Bytes()}, nil
}

// BlockBytes is the size of a block.
func (h *Host) BlockBytes() int { return h.cfg.BlockBytes }

// Arena is the tier's memory, for registering it with a transfer agent.
func (h *Host) Arena() []byte { return h.mem }

func (h *Host) block(i int32) []byte {
	off := int(i) * h.cfg.BlockBytes
	return h.mem[off : off+h.cfg.BlockBytes]
}

// Put stores a block (see Tier).
func (h *Host) Put(_ context.Context, m Meta, data []byte) (bool, error) {
	if len(data) != h.cfg.BlockBytes {
		return false, fmt.Errorf("kvbm: host put %#x: %d bytes, want %d", m.Hash, len(data), h.cfg.BlockBytes)
	}
	i, ok, err := h.beginPut(m)
	if !ok {
		return false, err
	}
	copy(h.block(i), data)
	h.endPut(i, m, len(data), nil)
	return true, nil
}

// Get copies a block out (see Tier).
func (h *Host) Get(_ context.Context, hash uint64, dst []byte) (Meta, error) {
	if len(dst) != h.cfg.BlockBytes {
		return Meta{}, fmt.Errorf("kvbm: host get %#x: %d bytes, want %d", hash, len(dst), h.cfg.BlockBytes)
	}
	i, m, err := h.beginGet(hash)
	if err != nil {
		return Meta{}, err
	}
	copy(dst, h.block(i))
	h.endGet(i, hash, len(dst), nil, false)
	return m, nil
}

// Close waits for the copies in progress and unmaps the arena; its blocks
// are gone (host memory does not outlive the process).
func (h *Host) Close() error {
	if !h.shut() {
		return nil
	}
	return h.arena.Close()
}
