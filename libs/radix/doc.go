// Package radix is the KV-aware router's index of which worker holds which
// KV-cache block, and in which storage tier.
//
// Block hashes are chained: block i's hash already encodes every block before
// it. So the index needs no explicit tree. It is a hash table from block hash
// to the compact set of (worker, tier mask) holders, and [Index.Match] walks
// a request's hashes in order, narrowing the set of workers that still hold
// an unbroken prefix and stopping at the first block nobody holds.
//
// # Concurrency
//
// Lookups never wait on writers and never take a lock. The table is split
// into shards; each shard is an open-addressed table published through an
// atomic pointer. A slot's key is written once (CAS from empty) and never
// changes; its holder set is an immutable value swapped by CAS
// (copy-on-write per block). Writers of different workers only contend on
// those per-block CASes; they share a shard's RWMutex in read mode, which
// is taken exclusively only for the short moment a shard is rehashed into a
// bigger (or compacted) table. Readers keep using the old table meanwhile,
// which is frozen and consistent because no writer touches it.
//
// Each worker's events are applied under that worker's own mutex, so one
// worker's batches are serialised and gap-checked without blocking any other
// worker. Whole-worker operations (Cleared, Resync, RemoveWorker) give the
// worker a fresh internal id, fill it while invisible, and publish the switch
// with one atomic store of the worker view; the old id's holdings are then
// swept and the id recycled. Match loads the view once and re-checks it when
// done, restarting (a bounded number of times) if it changed, so it sees
// either the old or the new state of that worker, never a mix.
//
// # Invariants
//
//   - A holder set is never mutated after it is published; an empty set is
//     stored as nil, and a set never lists a worker with an empty tier mask.
//   - Holder entries are sorted by internal id; sets with many holders also
//     carry per-tier cumulative bitmaps so Match costs O(workers/64) per
//     block instead of O(holders).
//   - Match reports only workers that were visible in the worker view it
//     loaded at its start; a worker's applied sequence number only advances
//     after the whole batch is applied.
//   - The index does no I/O, never logs and never panics on bad input.
package radix
