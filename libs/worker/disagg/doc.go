// Package disagg is disaggregated prefill between workers: a decode
// worker that gets a long prompt has a prefill worker compute it and
// write the KV straight into the decode worker's arena over libs/nixl,
// then decodes from the imported KV.
//
// Decode side (Decoder.Prepare, called before the request is submitted):
//
//	pin the prompt's cached leading blocks (they are neither recomputed nor sent)
//	uncached tokens <= threshold, or no prefill worker named ──► local prefill
//	AllocateForImport(the remaining full blocks) ──► RemotePrefill RPC
//	   (target: our agent name + metadata, region, block offsets, first block)
//	OK ──► CommitImportedAfter(last held hash, blocks, tokens) and pin them,
//	       Request.FirstToken = the prefill worker's first token
//	error, timeout, short write ──► release the import, prefill locally
//
// The pins are dropped once the engine produced the first output: by then
// the sequence holds its blocks itself. The engine recomputes only the
// prompt tail that is not a full block (and the last block when the prompt
// ends on a block boundary, since the last prompt token must be computed
// for logits), samples (discarding its own first sample for the imported
// one, so seeded sampling stays reproducible) and decodes on.
//
// Prefill side (Exporter.Prefill): the prompt runs on the local engine
// with max_tokens 1; every engine step's newly committed blocks (watched
// through KV events) are pinned and written to the target at once, so the
// transfer of early chunks overlaps the computation of later ones under
// chunked prefill. Blocks served from the local prefix cache are sent
// first. After the first token, the rest is written and every write
// waited for; pins are always released, and in-flight writes are
// cancelled and waited for before the pins go when anything fails.
//
// Invariant: the importer's blocks are reserved (refcounted) from
// AllocateForImport until CommitImportedAfter or ReleaseBlocks, and the
// exporter's blocks are pinned while a write reads them; on every path
// both are released, so KV usage returns to its baseline on both sides.
//
// Limitation: a prefill worker still writing after the decode worker gave
// up (its deadline passed) could land bytes in blocks the decode worker
// has already released and reused. The prefill worker cancels its writes
// as soon as the RPC is cancelled, which narrows the window but cannot
// close it without revoking the target's registration (as RDMA stacks do
// by invalidating the rkey).
package disagg
