// Package kvhash defines the chained block hashes that name KV-cache blocks.
//
// The engine keys its prefix cache with these hashes and the router indexes
// the KV events that carry them, so both sides must compute exactly the same
// numbers: this package is the single definition. It follows NVIDIA Dynamo's
// scheme (dynamo-tokens compute_hash_v2: xxh3-64 over token bytes, then a
// second xxh3-64 over the parent and local hashes).
//
// # Byte layout
//
// A block is blockSize consecutive token ids. For a block with tokens
// t0..tn-1, parent sequence hash P (or Root for the first block of a
// sequence) and salt S (0 when unused; a LoRA or tenant key otherwise):
//
//	local  = XXH3_64bits_withSeed(LE32(t0) || LE32(t1) || ... || LE32(tn-1), S)
//	chain  = local                                              if P == Root
//	chain  = XXH3_64bits_withSeed(LE64(P) || LE64(local), S)     otherwise
//
// LE32 and LE64 are little-endian encodings of the uint32 token id and the
// uint64 hash; the data is exactly 4*n bytes for the local hash and exactly
// 16 bytes for the chain step. Root is 0: a parent hash of 0 means "no
// parent". Only full blocks are hashed; a trailing partial block has no hash.
//
// The chained value identifies the whole prefix up to and including the
// block, so two sequences share a block hash only if they share every token
// before it (and the salt).
package kvhash

import (
	"encoding/binary"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// Root is the parent hash of the first block of every sequence.
const Root uint64 = 0

// Local hashes one block's token ids alone (no parent), seeded with salt.
// It never allocates on little-endian machines.
func Local(tokens []uint32, salt uint64) uint64 {
	if len(tokens) == 0 {
		return xxh3.HashSeed(nil, salt)
	}
	if littleEndian() {
		b := unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), 4*len(tokens))
		return xxh3.HashSeed(b, salt)
	}
	b := make([]byte, 4*len(tokens))
	for i, t := range tokens {
		binary.LittleEndian.PutUint32(b[4*i:], t)
	}
	return xxh3.HashSeed(b, salt)
}

// Combine chains a block's local hash onto its parent's chained hash.
func Combine(parent, local uint64, salt uint64) uint64 {
	if parent == Root {
		return local
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], parent)
	binary.LittleEndian.PutUint64(b[8:], local)
	return xxh3.HashSeed(b[:], salt)
}

// Chain returns the chained hash of one block whose parent block has the
// chained hash parent (Root for the first block).
func Chain(parent uint64, tokens []uint32, salt uint64) uint64 {
	return Combine(parent, Local(tokens, salt), salt)
}

// BlockHashes returns the chained hashes of every full block of tokens.
// A trailing partial block is ignored. blockSize must be positive; a
// non-positive blockSize yields no hashes.
func BlockHashes(tokens []uint32, blockSize int, salt uint64) []uint64 {
	if blockSize <= 0 {
		return nil
	}
	return AppendBlockHashes(make([]uint64, 0, len(tokens)/blockSize), Root, tokens, blockSize, salt)
}

// AppendBlockHashes appends the chained hashes of the full blocks of tokens,
// the first of which has parent as its parent, to dst and returns it. It
// allocates only when dst lacks capacity, so callers that keep dst between
// calls hash without allocating.
func AppendBlockHashes(dst []uint64, parent uint64, tokens []uint32, blockSize int, salt uint64) []uint64 {
	if blockSize <= 0 {
		return dst
	}
	for len(tokens) >= blockSize {
		parent = Chain(parent, tokens[:blockSize], salt)
		dst = append(dst, parent)
		tokens = tokens[blockSize:]
	}
	return dst
}

func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}
