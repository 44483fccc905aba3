package kvbm

import (
	"context"
	"errors"

	"switchyard.dev/libs/kvtier"
)

// Errors a tier returns; callers test them with errors.Is.
var (
	// ErrNotFound means the tier does not hold the block.
	ErrNotFound = errors.New("kvbm: block not in tier")
	// ErrCorrupt means the block's checksum did not match; the tier
	// dropped it.
	ErrCorrupt = errors.New("kvbm: block failed its checksum")
	// ErrFull means every slot is pinned by a read in progress.
	ErrFull = errors.New("kvbm: no slot free or evictable")
	// ErrClosed means the tier was closed.
	ErrClosed = errors.New("kvbm: tier closed")
)

// Meta is what a tier keeps of a block besides its bytes: its chained hash
// and its parent's (what the router's Stored event names), and its tokens
// when the writer has them, so a block can be re-advertised in full after
// a restart.
type Meta struct {
	Hash   uint64
	Parent uint64
	Tokens []uint32
}

// ChangeKind says whether a change added or removed a block.
type ChangeKind uint8

// The kinds of change.
const (
	Stored ChangeKind = iota + 1
	Removed
)

// Change is one block entering or leaving a tier.
type Change struct {
	Kind ChangeKind
	Tier kvtier.Tier
	Meta Meta
}

// OnChange receives a tier's changes in order, under the tier's lock: it
// must be quick and must not call back into the tier.
type OnChange func(Change)

// Stats is a tier's occupancy and traffic since it opened.
type Stats struct {
	Tier       kvtier.Tier
	Capacity   int // slots
	Blocks     int // slots holding an advertised block
	BlockBytes int
	Puts       uint64 // blocks written
	Dedups     uint64 // Puts of a block already held
	Hits       uint64 // Gets that copied a block
	Misses     uint64 // Gets of a block not held
	Corrupt    uint64 // blocks dropped on a checksum mismatch
	Evictions  uint64 // blocks removed to make room
	// WriteErrors and ReadErrors count the Puts and Gets that failed in
	// the medium (a disk error, a store down or slow): each cost only its
	// block, and the tier went on serving.
	WriteErrors uint64
	ReadErrors  uint64
	BytesIn     uint64
	BytesOut    uint64
}

// Tier is one storage tier of KV blocks.
type Tier interface {
	// Kind names the tier.
	Kind() kvtier.Tier
	// BlockBytes is the size of every block's data.
	BlockBytes() int
	// Put stores data, which must be BlockBytes long, as block m.Hash,
	// evicting the least recently used unpinned block when the tier is
	// full. A block already held is left as it is and Put returns false.
	Put(ctx context.Context, m Meta, data []byte) (stored bool, err error)
	// Get copies block hash into dst, which must be BlockBytes long, and
	// returns its Meta. After an error dst's contents are undefined: a
	// tier may read into it before the block's checksum fails.
	Get(ctx context.Context, hash uint64, dst []byte) (Meta, error)
	// Prefix returns how many of the leading hashes the tier holds, in a
	// row from the first.
	Prefix(hashes []uint64) int
	// Blocks lists the metas of every advertised block (for a resync).
	Blocks() []Meta
	// Stats returns occupancy and traffic.
	Stats() Stats
	// Close releases the tier's memory or files. A disk tier keeps its
	// blocks for the next open.
	Close() error
}

// Registrar is a tier that moves blocks straight into memory registered
// with it, as a libs/nixl agent does: the engine registers its KV arena,
// and a Get into the arena then lands there without a staging copy. A
// Get into memory not registered still works, through the tier's own
// buffers.
type Registrar interface {
	// RegisterMemory registers mem, which must stay mapped until the tier
	// is closed and must not be Go heap memory.
	RegisterMemory(mem []byte) error
}
