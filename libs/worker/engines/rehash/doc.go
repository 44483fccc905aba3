// Package rehash turns the KV cache events of a vLLM or SGLang engine into
// Switchyard's own, so the router can credit such a worker with its
// cached prefixes.
//
// The router names a block by the xxh3 chain of the request's tokens
// (libs/kvhash, salt 0, the worker's block size) and looks those names up
// in its index. vLLM names blocks with sha256 (or Python's hash with a
// per-process seed), SGLang with its own sha256 chain: inserting the
// engine's names into the index would never match a lookup. So a worker
// fronting such an engine consumes its events (libs/vllmevents decodes
// both encodings) and re-hashes every stored block from the event's
// token_ids with kvhash, exactly as the router hashes a request, keeping a
// map from the engine's hash to ours for the parents of later blocks and
// for removals (llm-d's dual-key design). It republishes the result
// through a kvevent.Journal, so the router follows the worker like any
// other: resume after a sequence number, or a dump of every block it
// holds.
//
// # Invariants
//
//   - What the journal says is cached is a subset of what the engine
//     caches, never more: a stored event whose parent this process never
//     saw (it started after the parent was stored, or lost it to a gap) is
//     dropped and counted, because its chain cannot be computed; so are
//     blocks whose engine hash covers more than their tokens (a LoRA
//     adapter, extra_keys for multimodal inputs or a cache salt), which a
//     token-only chain would wrongly credit to other requests.
//   - A gap in the engine's sequence (batches lost past its replay buffer,
//     an engine restart) clears everything: the journal gets a Cleared
//     event and the map is emptied, then it rebuilds from what follows.
//   - A block is announced once per tier however many engine blocks map to
//     it (SGLang publishes one page twice when two radix keys that differ
//     only in their extra key share its tokens), and removed when the last
//     one goes.
//   - Events with a block size other than the configured one are refused:
//     HandleBatch returns ErrBlockSize after clearing, since every chain
//     would be computed over the wrong token windows.
//   - A Rehasher is safe for concurrent use; Dump and the journal agree on
//     the sequence number a dump reflects.
package rehash
