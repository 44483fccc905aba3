// Package kvbm keeps KV-cache blocks in the tiers below an engine's own
// memory: host memory (G2), local disk (G3) and, through an object store,
// shared storage (G4). The engine's arena is G1 (libs/engine/kvcache).
//
// Every tier is a Tier: a fixed number of block slots of one block size,
// keyed by the block's chained hash (libs/kvhash), so a block means the
// same tokens in every tier of every worker serving the same model and
// block size. A tier is a cache, never the only copy that matters: losing
// a block costs a recompute, so a tier drops what it cannot vouch for
// rather than serve it.
//
// # Invariants
//
//   - A block is advertised (a Stored change) only once its bytes are
//     wholly in the tier, and withdrawn (a Removed change) before its slot
//     is reused: the router's view of a tier never names a block the tier
//     could not serve, except for the one it is removing at that moment.
//   - Changes are reported in the order they happen, under the tier's lock,
//     so a consumer that applies them in order holds the tier's exact
//     contents (Blocks lists them, for a resync).
//   - Get either copies a block whose checksum matched, or fails: a block
//     that fails its check is dropped (and withdrawn) and reported as
//     ErrCorrupt; the caller recomputes it.
//   - A slot being read is pinned: eviction never reuses it mid-copy.
//   - Tiers are safe for concurrent use; copies run outside the lock.
package kvbm
