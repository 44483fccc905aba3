// Package llamacpp drives a llama.cpp llama-server as a worker's engine
// (package engines): generation with token ids in and out over its native
// /completion endpoint, load from its /metrics and /slots, start-up checks
// (it answers, serves the worker's model under its name, with the
// tokenizer's vocabulary and room for the block size), and KV events that
// llama-server does not publish, synthesized exactly.
//
// # KV events from slots
//
// llama-server keeps one sequence's KV per slot and reuses its longest
// common prefix with the next prompt given that slot. Run with
// --cache-ram 0 (no host prompt cache restoring other prefixes) and
// without a unified KV pool shared by the slots, that is all it caches.
// So the worker pins every request to a slot (id_slot, cache_prompt), and
// keeps its own mirror of what each slot holds: the prefix the slot keeps
// when a request is given to it, the prompt once the first token is back,
// and afterwards the prompt and the generated tokens llama-server reports
// cached (tokens_cached). A request goes to the free slot that caches the
// most full blocks of its prompt, the least recently used on a tie, and
// waits in the worker (by priority, then arrival) while every slot is
// busy.
//
// Every change of a mirror becomes Removed and Stored events for the
// blocks that changed, named by the libs/kvhash chain of the slot's
// tokens at the worker's block size (salt 0): exactly the names the router
// computes for a request's tokens. A block several slots hold is announced
// once. The events go into a kvevent.Journal, the built-in engine's type,
// so a router follows this worker with the same resume and dump.
//
// Invariants: the journal claims only blocks the slots are known to hold
// (after a cancelled or worker-stopped stream, a slot may hold more than
// its mirror); when the server stops answering, every mirror is cleared
// (one Cleared event) and requests that began before are not claimed.
// llama-server's own count of cached prompt tokens (timings.cache_n) is
// checked against the mirror's prediction on every request; a difference
// (something else using the slots, or a host prompt cache) is counted in
// MirrorMismatches.
//
// # Generation
//
// Stop conditions, limits, text and usage are applied by tokstream, as
// the built-in engine applies them, so greedy output is the same token for
// token. llama-server is asked for min(max_tokens, context - prompt)
// tokens with its own samplers other than temperature, top-k and top-p
// off; it stops by itself at that limit and at EOS, and the worker reads
// its final event; every other stop closes the HTTP stream, which
// llama-server takes as a cancellation. Logprobs, penalties, logit bias
// and output constraints are refused (InvalidArgument naming the field).
// Sampling with temperature draws from llama.cpp's generator, not the
// built-in engine's: only greedy output is the same.
package llamacpp
