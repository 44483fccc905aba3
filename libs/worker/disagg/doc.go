// Package disagg moves KV between workers over libs/nixl, two ways.
// Disaggregated prefill: a decode worker that gets a long prompt has a
// prefill worker compute it and write the KV straight into the decode
// worker's arena, then decodes from the imported KV. Prefix pull (see
// prefix.go): a worker about to prefill a prompt whose leading blocks a
// peer holds copies them from it (ExportPrefix) and computes the rest.
//
// Decode side (Decoder.Prepare, called before the request is submitted):
//
//	pin the prompt's cached leading blocks (they are neither recomputed nor sent)
//	uncached tokens <= threshold, or no prefill worker named ──► local prefill
//	AllocateForImport(the remaining full blocks)
//	register the blocks' span of the arena as a window (a region of its own)
//	──► RemotePrefill RPC (target: our agent name + metadata, the window,
//	    block offsets in it, first block)
//	OK ──► revoke the window, CommitImportedAfter(last held hash, blocks,
//	       tokens), keeping the blocks' references; Request.FirstToken =
//	       the prefill worker's first token
//	error, timeout, short write ──► prefill locally; revoke the window in
//	       the background and release the import once no write is in flight
//
// The pins and the import's references are dropped once the engine
// produced the first output: by then the sequence holds its blocks itself,
// and until then nothing can evict them. The engine recomputes only the
// prompt tail that is not a full block (and the last block when the prompt
// ends on a block boundary, since the last prompt token must be computed
// for logits), samples (discarding its own first sample for the imported
// one, so seeded sampling stays reproducible) and decodes on.
//
// Prefill side (Exporter.Prefill): the prompt runs on the local engine
// with max_tokens 1 (a structured output's first token masked for the
// decode worker's budget, output_budget, as the decode engine masks its
// own first sample, so the outputs match a local run); every engine step's newly committed blocks (watched
// through KV events) are pinned and written to the target at once, so the
// transfer of early chunks overlaps the computation of later ones under
// chunked prefill. Blocks served from the local prefix cache are sent
// first. After the first token, the rest is written and every write
// waited for; pins are always released, and in-flight writes are
// cancelled and waited for before the pins go when anything fails.
//
// Invariant: the importer's blocks are reserved (refcounted) from
// AllocateForImport until the request's first output, without a gap:
// CommitImportedAfter hands the references back, on the blocks now cached.
// A failed or refused import releases them (ReleaseBlocks), at once or
// after quarantine. The exporter's blocks are pinned while a write reads
// them. On every path both are released, so KV usage returns to its
// baseline on both sides.
//
// Late writes: a prefill worker may still be writing after the decode
// worker gave up on it (deadline, broken RPC). Such writes never land in
// reused blocks: the decode worker revokes the request's window
// (nixl DeregisterMemory), which rejects every later write into it (the
// target checks tcp, local and tagged ucx writes against its regions;
// one-sided ucx puts lose their rkey) and waits for the writes in flight,
// and only then releases the blocks. Until then they are quarantined
// (Decoder.Quarantined).
package disagg
