package kvbm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/backend/file"
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
// The tier moves blocks through a libs/nixl agent of its own with the
// file storage backend: the slot buffers are its registered memory and
// the slab its registered file, so a block goes to and from the disk by
// the same descriptor API as every other KV transfer.
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
	bufs      chan int // free slot buffers, by index into bufArena
	bufArena  *arena.Arena
	agent     *nixl.Agent
	mem, slab nixl.RegionID // bufArena and the slab, registered with agent
	*store
}

// agentName names the tier's agent; its transfers are to itself.
const agentName = "kvbm-disk"

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
	d.bufArena, d.bufs = bufs, make(chan int, cfg.IODepth)
	for i := range cfg.IODepth {
		d.bufs <- i
	}
	if err := d.openAgent(); err != nil {
		_ = d.Close()
		return nil, err
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
	// The room is checked first: a preallocation the disk cannot hold
	// may take all of its free space before it fails, and other writers
	// on the disk would see it full meanwhile.
	err = roomFor(f, size)
	if err == nil {
		err = unix.Fallocate(int(f.Fd()), 0, 0, size)
		if errors.Is(err, unix.EOPNOTSUPP) { // no preallocation here: the room was checked
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

// openAgent registers the slot buffers and the slab with an agent of the
// tier's own. The slab's descriptor keeps the O_DIRECT it was opened
// with, and the buffers and slots are aligned for it.
func (d *Disk) openAgent() error {
	a, err := nixl.NewAgent(nixl.Config{Name: agentName, Storage: []nixl.StorageFactory{file.New(file.Config{Depth: 2})}})
	if err != nil {
		return fmt.Errorf("kvbm: disk tier: %w", err)
	}
	d.agent = a
	if d.mem, err = a.RegisterMemory(d.bufArena.Bytes()); err != nil {
		return fmt.Errorf("kvbm: disk tier: %w", err)
	}
	if d.slab, err = a.RegisterStorage(nixl.FileSegment{File: d.f, Len: uint64(d.cfg.Blocks) * uint64(d.slotLen)}); err != nil {
		return fmt.Errorf("kvbm: disk tier: %w", err)
	}
	return nil
}

// buf is slot buffer b.
func (d *Disk) buf(b int) []byte { return d.bufArena.Bytes()[b*d.slotLen : (b+1)*d.slotLen] }

// transfer moves the first n bytes of slot buffer b to (Write) or from
// (Read) slot i. It returns only once the backend no longer touches the
// buffer, so the buffer can go back to the pool whatever the outcome.
func (d *Disk) transfer(ctx context.Context, op nixl.Op, b int, i int32, n int) error {
	x, err := d.agent.Post(nixl.XferRequest{Op: op, Peer: agentName,
		Local:  []nixl.Desc{{Region: d.mem, Offset: uint64(b * d.slotLen), Len: uint64(n)}},
		Remote: []nixl.Desc{{Region: d.slab, Offset: uint64(d.offset(i)), Len: uint64(n)}}})
	if err != nil {
		return err
	}
	return x.WaitOrCancel(ctx)
}

// roomFor reports ENOSPC unless the file system holding f has room for
// f to take size bytes, counting what f holds already.
func roomFor(f *os.File, size int64) error {
	var st unix.Statfs_t
	if unix.Fstatfs(int(f.Fd()), &st) == nil { // else the preallocation decides
		held := int64(0)
		var fst unix.Stat_t
		if unix.Fstat(int(f.Fd()), &fst) == nil {
			held = fst.Blocks * 512
		}
		if free := int64(st.Bavail) * st.Bsize; size-held > free {
			return fmt.Errorf("%d bytes free: %w", free, unix.ENOSPC)
		}
	}
	return nil
}

// recover re-advertises the blocks whose headers check out.
func (d *Disk) recover() error {
	b := <-d.bufs
	defer func() { d.bufs <- b }()
	hdr := d.buf(b)[:d.headerLen]
	for i := range d.cfg.Blocks {
		if err := d.transfer(context.Background(), nixl.Read, b, int32(i), d.headerLen); err != nil {
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

func (d *Disk) buffer(ctx context.Context) (int, error) {
	select {
	case b := <-d.bufs:
		return b, nil
	case <-ctx.Done():
		return 0, ctx.Err()
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
	b, err := d.buffer(ctx)
	if err != nil {
		return false, err
	}
	defer func() { d.bufs <- b }()
	i, ok, err := d.beginPut(m)
	if !ok {
		return false, err
	}
	buf := d.buf(b)
	clear(buf[:d.headerLen])
	appendHeader(buf[:0], m, len(data), checksum(data))
	copy(buf[d.headerLen:], data)
	werr := d.transfer(ctx, nixl.Write, b, i, d.slotLen)
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
	b, err := d.buffer(ctx)
	if err != nil {
		return Meta{}, err
	}
	defer func() { d.bufs <- b }()
	i, _, err := d.beginGet(hash)
	if err != nil {
		return Meta{}, err
	}
	buf := d.buf(b)
	rerr := d.transfer(ctx, nixl.Read, b, i, d.slotLen)
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
	var err error
	if d.agent != nil {
		err = d.agent.Close() // after the I/O in progress; releases its registrations
	}
	err = errors.Join(err, d.f.Close())
	if d.bufArena != nil {
		err = errors.Join(err, d.bufArena.Close())
	}
	return err
}
