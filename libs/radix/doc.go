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
// atomic pointer. Holder sets are immutable values (copy-on-write per
// block). A shard's writers are serialised by its mutex, held for a single
// block's update (or a rehash or scan of that shard), never for a batch.
// A rehash builds a new table and publishes it; readers keep using the old
// one meanwhile, which is frozen because no writer touches it any more.
//
// A slot whose set became nil is a tombstone: its key stays, so probe
// chains never break. It is revived in place when its key comes back and
// otherwise reused for a new key. A reuse stores the new key, increments
// the table's reuses counter, then stores the new set; a reader that saw
// the counter unchanged across its probe knows the set it read belongs to
// its key, and re-probes otherwise (that takes another write completing in
// the shard during a few loads, never a wait on a writer in progress).
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
