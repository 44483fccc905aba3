package kvbm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/nixl/arena"
)

// DiskConfig sizes a local-disk tier.
type DiskConfig struct {
	// Dir holds the tier's slab file; it is created if missing.
	Dir        string
	Blocks     int // slots
	BlockBytes int
	// MaxTokens is the most tokens a block's header carries (the engine's
	// block size); default 512.
	MaxTokens int
	// IODepth is how many reads and writes may be in flight at once
	// (default 4).
	IODepth  int
	OnChange OnChange
}

// align is the unit of direct I/O: offsets, lengths and buffer addresses
// are multiples of it.
const align = 4096

func roundUp(n, to int) int { return (n + to - 1) / to * to }

// Disk is the local-disk tier (G3): one preallocated slab file of
// fixed-size slots, each a block header (header.go) and the block's data,
// written in one aligned write, with O_DIRECT where the filesystem allows
// it (the page cache would only duplicate what the host tier holds).
//
// A block is advertised once its write returned. Nothing is fsynced: a
// cache needs no durability, only the certainty that what it serves is
// what was written, which the checksums give. When the tier opens on an
// existing slab it reads every slot's header and re-advertises the blocks
// whose headers check out; a block's data is checked on every read, so a
// torn or rotted block is dropped and recomputed, never served.
type Disk struct {
	cfg       DiskConfig
	f         *os.File
	path      string
	headerLen int // bytes reserved for a header at each slot's start
	slotLen   int
	bufs      chan []byte // IODepth aligned slot buffers
	bufArena  *arena.Arena
	*store
}

// OpenDisk opens (or creates) the tier's slab in cfg.Dir, preallocating
// its full size, so a disk without room fails here, with the directory
// named, rather than at some later write; then it re-advertises the valid
// blocks it finds.
func OpenDisk(cfg DiskConfig) (*Disk, error) {
	if cfg.MaxTokens == 0 {
		cfg.MaxTokens = 512
	}
	if cfg.IODepth <= 0 {
		cfg.IODepth = 4
	}
	switch {
	case cfg.Dir == "":
		return nil, errors.New("kvbm: disk tier: no directory")
	case cfg.Blocks <= 0 || cfg.BlockBytes <= 0:
		return nil, fmt.Errorf("kvbm: disk tier: %d blocks of %d bytes: both must be positive", cfg.Blocks, cfg.BlockBytes)
	case cfg.MaxTokens < 0 || cfg.MaxTokens > MaxHeaderTokens:
		return nil, fmt.Errorf("kvbm: disk tier: %d tokens a block: want 0 to %d", cfg.MaxTokens, MaxHeaderTokens)
	}
	d := &Disk{cfg: cfg, headerLen: roundUp(HeaderLen(cfg.MaxTokens), align)}
	d.slotLen = d.headerLen + roundUp(cfg.BlockBytes, align)
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("kvbm: disk tier: %w", err)
	}
	// The geometry is in the name: a slab of another block size or header
	// size is never misread as this one's.
	d.path = filepath.Join(cfg.Dir, fmt.Sprintf("kvbm-slab-v%d-%dB-%dt.kv", headerVersion, cfg.BlockBytes, cfg.MaxTokens))
	if err := d.open(); err != nil {
		return nil, err
	}
	d.store = newStore(kvtier.Disk, cfg.Blocks, cfg.BlockBytes, cfg.OnChange) // after the slab: a tier the disk cannot hold costs no memory
	bufs, err := arena.Map(cfg.IODepth * d.slotLen)
	if err != nil {
		_ = d.f.Close()
		return nil, fmt.Errorf("kvbm: disk tier: %w", err)
	}
	d.bufArena, d.bufs = bufs, make(chan []byte, cfg.IODepth)
	for i := range cfg.IODepth {
		d.bufs <- bufs.Bytes()[i*d.slotLen : (i+1)*d.slotLen]
	}
	if err := d.recover(); err != nil {
		_ = d.Close()
		return nil, err
	}
	return d, nil
}

// open opens the slab with O_DIRECT when the filesystem takes it, and
// preallocates it.
func (d *Disk) open() error {
	size := int64(d.cfg.Blocks) * int64(d.slotLen)
	f, err := os.OpenFile(d.path, os.O_RDWR|os.O_CREATE|unix.O_DIRECT, 0o644)
	if err != nil { // tmpfs and some others refuse O_DIRECT
		f, err = os.OpenFile(d.path, os.O_RDWR|os.O_CREATE, 0o644)
	}
	if err != nil {
		return fmt.Errorf("kvbm: disk tier: %w", err)
	}
	// One tier a slab: a second process (or a second tier in this one)
	// writing the same slots would corrupt both. The lock goes with the
	// file's close.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		return fmt.Errorf("kvbm: disk tier: %s is in use by another tier (%w): give each worker its own directory", d.path, err)
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) { // no preallocation here: at least check the room
		var st unix.Statfs_t
		if serr := unix.Fstatfs(int(f.Fd()), &st); serr == nil && uint64(size) > st.Bavail*uint64(st.Bsize) {
			err = fmt.Errorf("%d bytes free: %w", st.Bavail*uint64(st.Bsize), unix.ENOSPC)
		} else {
			err = nil
		}
	}
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("kvbm: disk tier: preallocating %d bytes in %s: %w", size, d.cfg.Dir, err)
	}
	if err := f.Truncate(size); err != nil { // a smaller tier than the slab's last one
		_ = f.Close()
		return fmt.Errorf("kvbm: disk tier: %w", err)
	}
	d.f = f
	return nil
}

// recover re-advertises the blocks whose headers check out.
func (d *Disk) recover() error {
	buf := <-d.bufs
	defer func() { d.bufs <- buf }()
	hdr := buf[:d.headerLen]
	for i := range d.cfg.Blocks {
		if _, err := d.f.ReadAt(hdr, d.offset(int32(i))); err != nil {
			return fmt.Errorf("kvbm: disk tier: reading slot %d of %s: %w", i, d.path, err)
		}
		h, err := decodeHeader(hdr)
		if err != nil || h.dataLen != d.cfg.BlockBytes {
			continue // never written, torn, or another geometry: a free slot
		}
		d.restore(int32(i), h.meta)
	}
	return nil
}

func (d *Disk) offset(i int32) int64 { return int64(i) * int64(d.slotLen) }

// BlockBytes is the size of a block.
func (d *Disk) BlockBytes() int { return d.cfg.BlockBytes }

func (d *Disk) buffer(ctx context.Context) ([]byte, error) {
	select {
	case b := <-d.bufs:
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Put writes a block (see Tier). A write that fails (a disk error) frees
// the slot and returns the error; the tier keeps working.
func (d *Disk) Put(ctx context.Context, m Meta, data []byte) (bool, error) {
	if len(data) != d.cfg.BlockBytes {
		return false, fmt.Errorf("kvbm: disk put %#x: %d bytes, want %d", m.Hash, len(data), d.cfg.BlockBytes)
	}
	if len(m.Tokens) > d.cfg.MaxTokens {
		return false, fmt.Errorf("kvbm: disk put %#x: %d tokens, at most %d", m.Hash, len(m.Tokens), d.cfg.MaxTokens)
	}
	buf, err := d.buffer(ctx)
	if err != nil {
		return false, err
	}
	defer func() { d.bufs <- buf }()
	i, ok, err := d.beginPut(m)
	if !ok {
		return false, err
	}
	clear(buf[:d.headerLen])
	appendHeader(buf[:0], m, len(data), checksum(data))
	copy(buf[d.headerLen:], data)
	_, werr := d.f.WriteAt(buf, d.offset(i))
	d.endPut(i, m, len(data), werr)
	if werr != nil {
		return false, fmt.Errorf("kvbm: disk put %#x: %w", m.Hash, werr)
	}
	return true, nil
}

// Get reads a block and checks it (see Tier).
func (d *Disk) Get(ctx context.Context, hash uint64, dst []byte) (Meta, error) {
	if len(dst) != d.cfg.BlockBytes {
		return Meta{}, fmt.Errorf("kvbm: disk get %#x: %d bytes, want %d", hash, len(dst), d.cfg.BlockBytes)
	}
	buf, err := d.buffer(ctx)
	if err != nil {
		return Meta{}, err
	}
	defer func() { d.bufs <- buf }()
	i, _, err := d.beginGet(hash)
	if err != nil {
		return Meta{}, err
	}
	_, rerr := d.f.ReadAt(buf, d.offset(i))
	var m Meta
	var data []byte
	if rerr == nil {
		m, data, rerr = d.check(buf, hash)
	}
	if rerr == nil {
		copy(dst, data)
	}
	// Unreadable or not what was written: never serve it again.
	d.endGet(i, hash, len(dst), rerr, errors.Is(rerr, ErrCorrupt))
	if rerr != nil {
		return Meta{}, fmt.Errorf("kvbm: disk get %#x: %w", hash, rerr)
	}
	return m, nil
}

// check verifies a slot read into buf as block hash.
func (d *Disk) check(buf []byte, hash uint64) (Meta, []byte, error) {
	h, err := decodeHeader(buf[:d.headerLen])
	if err != nil {
		return Meta{}, nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if h.meta.Hash != hash || h.dataLen != d.cfg.BlockBytes {
		return Meta{}, nil, fmt.Errorf("%w: slot holds block %#x of %d bytes", ErrCorrupt, h.meta.Hash, h.dataLen)
	}
	data := buf[d.headerLen : d.headerLen+d.cfg.BlockBytes]
	if sum := checksum(data); sum != h.dataSum {
		return Meta{}, nil, fmt.Errorf("%w: data checksum %#08x, header says %#08x", ErrCorrupt, sum, h.dataSum)
	}
	return h.meta, data, nil
}

// Close waits for the I/O in progress and closes the slab; its blocks are
// found again by the next OpenDisk of the same directory and geometry.
func (d *Disk) Close() error {
	if d.store != nil && !d.shut() {
		return nil
	}
	err := d.f.Close()
	if d.bufArena != nil {
		err = errors.Join(err, d.bufArena.Close())
	}
	return err
}
