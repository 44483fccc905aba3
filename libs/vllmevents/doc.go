// Package vllmevents lets real vLLM and SGLang workers sit behind the
// KV-aware router: it decodes the KV cache events those engines publish
// over ZeroMQ and subscribes to them with gap detection and replay.
//
// # Wire format
//
// The engine's PUB socket sends multipart messages [topic, seq, payload]:
// seq is an 8-byte big-endian counter that increases by one per message,
// payload a MessagePack batch [ts, events, data_parallel_rank?] as msgspec
// encodes vLLM's structs (see Decoder for every accepted variant). The
// optional ROUTER replay socket answers a request [empty, start seq] with
// one [empty, seq, payload] reply per buffered batch from start on, then
// [empty, EndSeq, empty].
//
// # Invariants
//
//   - Decoding never panics and never reads out of bounds: every length is
//     checked against the input before use, nesting of skipped values is
//     bounded, and all failures wrap ErrMalformed.
//   - A Decoder allocates nothing once its buffers have grown (LoRA names
//     are interned); what it returns aliases those buffers until the next
//     Decode.
//   - Subscribe hands batches to its Handler strictly in sequence order,
//     each exactly once; anything it cannot deliver (lost batches, a
//     publisher restart, an undecodable payload) is reported as a Gap, so
//     the consumer knows exactly when to resynchronise.
//   - The package does no logging of its own except through the injected
//     *slog.Logger, and holds no package-level state.
package vllmevents
