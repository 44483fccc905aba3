// Package ingest keeps the router's radix index in step with the workers'
// KV caches.
//
// For every worker in discovery it follows WorkerService.SubscribeKvEvents
// over Connect, resuming after the last sequence number the index applied,
// so a router restarted from a snapshot continues where it stopped instead
// of re-reading every cache. It falls back to a full dump (dump=true, then
// radix Resync) whenever continuity is lost: a gap the index detects
// (radix.ErrSeqGap), or a worker that answers OutOfRange/FailedPrecondition
// because the requested history is gone. Other stream errors reconnect with
// capped exponential backoff. A worker that leaves discovery loses its
// blocks at once.
//
// vLLM and SGLang engines are followed the same way, through the worker
// that fronts them: it consumes the engine's ZeroMQ events, re-hashes each
// block from its token ids with the router's own chain
// (libs/worker/engines/rehash) and serves them from its journal. The
// engine's own hashes (sha256, or Python's hash with a per-process seed)
// never match the chains routing looks up, so the router reads no engine
// socket itself.
package ingest
