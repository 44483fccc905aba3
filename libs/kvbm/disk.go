package kvbm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

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
	direct    bool
	headerLen int // bytes reserved for a header at each slot's start
	slotLen   int
	bufs      chan []byte // IODepth aligned slot buffers
	bufArena  *arena.Arena

	mu       sync.Mutex
	x        *slots
	pending  map[uint64]bool
	stats    Stats
	closed   bool
	inflight sync.WaitGroup
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
	d := &Disk{cfg: cfg, headerLen: roundUp(HeaderLen(cfg.MaxTokens), align), pending: map[uint64]bool{}}
	d.slotLen = d.headerLen + roundUp(cfg.BlockBytes, align)
	d.stats = Stats{Tier: kvtier.Disk, Capacity: cfg.Blocks, BlockBytes: cfg.BlockBytes}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("kvbm: disk tier: %w", err)
	}
	// The geometry is in the name: a slab of another block size or header
	// size is never misread as this one's.
	d.path = filepath.Join(cfg.Dir, fmt.Sprintf("kvbm-slab-v%d-%dB-%dt.kv", headerVersion, cfg.BlockBytes, cfg.MaxTokens))
	if err := d.open(); err != nil {
		return nil, err
	}
	d.x = newSlots(cfg.Blocks) // after the slab: a tier the disk cannot hold costs no memory
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
	d.direct = err == nil
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
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range d.cfg.Blocks {
		if _, err := d.f.ReadAt(hdr, d.offset(int32(i))); err != nil {
			return fmt.Errorf("kvbm: disk tier: reading slot %d of %s: %w", i, d.path, err)
		}
		h, err := decodeHeader(hdr)
		if err != nil || h.dataLen != d.cfg.BlockBytes {
			continue // never written, torn, or another geometry: a free slot
		}
		if _, dup := d.x.live(h.meta.Hash); dup {
			continue
		}
		d.x.take(int32(i))
		d.x.publish(int32(i), h.meta)
		d.emit(Stored, h.meta)
	}
	return nil
}

func (d *Disk) offset(i int32) int64 { return int64(i) * int64(d.slotLen) }

func (d *Disk) emit(k ChangeKind, m Meta) {
	if d.cfg.OnChange != nil {
		d.cfg.OnChange(Change{Kind: k, Tier: kvtier.Disk, Meta: m})
	}
}

// Kind is kvtier.Disk.
func (d *Disk) Kind() kvtier.Tier { return kvtier.Disk }

// BlockBytes is the size of a block.
func (d *Disk) BlockBytes() int { return d.cfg.BlockBytes }

// Direct reports whether the slab is read and written with O_DIRECT.
func (d *Disk) Direct() bool { return d.direct }

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
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return false, ErrClosed
	}
	if i, ok := d.x.live(m.Hash); ok || d.pending[m.Hash] {
		if ok {
			d.x.touch(i)
		}
		d.stats.Dedups++
		d.mu.Unlock()
		return false, nil
	}
	i, evicted, ok := d.x.reserve()
	if !ok {
		d.mu.Unlock()
		return false, ErrFull
	}
	if evicted != nil {
		d.stats.Evictions++
		d.emit(Removed, *evicted)
	}
	d.pending[m.Hash] = true
	d.inflight.Add(1)
	d.mu.Unlock()

	clear(buf[:d.headerLen])
	appendHeader(buf[:0], m, len(data), checksum(data))
	copy(buf[d.headerLen:], data)
	_, werr := d.f.WriteAt(buf, d.offset(i))

	d.mu.Lock()
	defer d.mu.Unlock()
	d.inflight.Done()
	delete(d.pending, m.Hash)
	if werr != nil {
		d.x.abandon(i)
		return false, fmt.Errorf("kvbm: disk put %#x: %w", m.Hash, werr)
	}
	m.Tokens = slices.Clone(m.Tokens)
	d.x.publish(i, m)
	d.stats.Puts++
	d.stats.BytesIn += uint64(len(data))
	d.emit(Stored, m)
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
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return Meta{}, ErrClosed
	}
	i, ok := d.x.live(hash)
	if !ok {
		d.stats.Misses++
		d.mu.Unlock()
		return Meta{}, ErrNotFound
	}
	d.x.pin(i)
	d.inflight.Add(1)
	d.mu.Unlock()

	_, rerr := d.f.ReadAt(buf, d.offset(i))
	var m Meta
	var data []byte
	if rerr == nil {
		m, data, rerr = d.check(buf, hash)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	d.inflight.Done()
	if rerr != nil {
		// Unreadable or not what was written: never serve it again.
		if s := &d.x.s[i]; s.state == slotLive && s.meta.Hash == hash {
			d.emit(Removed, d.x.drop(i))
			d.stats.Corrupt++
		}
		d.x.unpin(i)
		return Meta{}, fmt.Errorf("kvbm: disk get %#x: %w", hash, rerr)
	}
	copy(dst, data)
	d.x.unpin(i)
	d.stats.Hits++
	d.stats.BytesOut += uint64(len(dst))
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

// Prefix counts the leading hashes held.
func (d *Disk) Prefix(hashes []uint64) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	for n, hash := range hashes {
		if _, ok := d.x.live(hash); !ok {
			return n
		}
	}
	return len(hashes)
}

// Blocks lists the advertised blocks.
func (d *Disk) Blocks() []Meta {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.x.metas()
}

// Stats returns occupancy and traffic.
func (d *Disk) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.Blocks = len(d.x.index)
	return s
}

// Close waits for the I/O in progress and closes the slab; its blocks are
// found again by the next OpenDisk of the same directory and geometry.
func (d *Disk) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.mu.Unlock()
	d.inflight.Wait()
	err := d.f.Close()
	if d.bufArena != nil {
		err = errors.Join(err, d.bufArena.Close())
	}
	return err
}
