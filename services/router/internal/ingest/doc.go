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
// Static vLLM/SGLang workers are followed over ZeroMQ through
// switchyard.dev/libs/vllmevents. Those engines cannot dump their cache, so a
// lost batch clears the worker's entry (the index then refills from new
// events) rather than leaving blocks the engine may have evicted.
package ingest
