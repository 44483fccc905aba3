// Package engines is the seam between a worker and the engine that
// computes its tokens: the built-in engine (libs/engine), or a third-party
// server the worker drives (llama.cpp's llama-server, vLLM, SGLang).
//
// Whatever the engine, the worker's contract stays the one the router and
// the frontend rely on: token ids in and out (the frontend tokenizes, the
// router hashes those ids), finish reasons and usage as the built-in
// engine reports them, cancellation by context, and a KV event journal
// (package kvevent) named with libs/kvhash chains, that a subscriber
// resumes after a sequence number or rebuilds from a dump. An adapter
// that cannot tell what its engine caches publishes no events (KV returns
// nil) and the router approximates instead.
package engines

import (
	"context"
	"errors"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/kvevent"
)

// Engine is what a worker serves requests with.
type Engine interface {
	// ModelInfo describes the model and the KV geometry the worker
	// announces (ContextLen bounds prompt plus output; BlockSize is the
	// block size of the KV events).
	ModelInfo() engine.ModelInfo
	// Validate checks r as Generate would, without starting it. Errors
	// match engine.ErrInvalidRequest and name the refused field with
	// engine.FieldError.
	Validate(r engine.Request) error
	// Generate starts r. The request lives until its stream's final
	// output: ctx ending or Stream.Cancel ends it early (FinishCancelled),
	// and the engine stops computing it.
	Generate(ctx context.Context, r engine.Request) (Stream, error)
	// Metrics is a load snapshot: GetLoad and the worker's /metrics read
	// it, so it must not block on the engine.
	Metrics() engine.Metrics
	// KV is the engine's KV event journal, or nil when it publishes none.
	KV() KVEvents
	// Run drives the engine until ctx ends. health is told of every change
	// of the engine's health: a non-nil error when it stopped serving (the
	// worker then leaves discovery), nil when it serves again. Run returns
	// ctx's error, or another when the engine cannot go on at all.
	Run(ctx context.Context, health func(error)) error
	// Close releases the engine once Run has returned.
	Close() error
}

// Stream delivers one request's outputs, the last with Finish set; after
// it Recv returns io.EOF. Recv returns an output already queued even when
// ctx is done (the handler merges queued outputs that way), and ctx's
// error only when nothing is queued.
type Stream interface {
	Recv(ctx context.Context) (engine.Output, error)
	Cancel()
}

// KVEvents is a KV event journal with the semantics of *engine.Engine's:
// Subscribe resumes after a sequence number (ErrGap from the subscription
// when it is no longer buffered), Dump is a Stored event per cached block,
// parents first, tagged with the sequence number it reflects, and EventSeq
// is the latest number. A journal starts at a random number each run
// (kvevent.RandomStart).
type KVEvents interface {
	Subscribe(after uint64) *kvevent.Subscription
	Dump() kvevent.Batch
	EventSeq() uint64
}

// Builtin is the built-in engine behind the seam.
type Builtin struct{ *engine.Engine }

var _ Engine = Builtin{}

// Generate submits r.
func (b Builtin) Generate(ctx context.Context, r engine.Request) (Stream, error) {
	st, err := b.Submit(ctx, r)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// KV is the engine's own journal.
func (b Builtin) KV() KVEvents { return b.Engine }

// Run runs the engine loop; the built-in engine has no health of its own
// to report.
func (b Builtin) Run(ctx context.Context, _ func(error)) error { return b.Engine.Run(ctx) }

// ErrUnavailable marks an error of an engine that stopped answering (its
// process died, its connection broke): the worker answers Unavailable, so
// the caller retries the request on another worker.
var ErrUnavailable = errors.New("engine unavailable")
