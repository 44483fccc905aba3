// Package workload produces the sessions a benchmark sends: synthetic
// conversations drawn from length distributions, or a replayed trace.
//
// A Source hands out sessions one at a time and builds prompts lazily, so a
// trace of twelve thousand 12k-token requests never sits in memory as token
// arrays. Every session draws from its own seeded generator, so the prompts
// of a seeded run do not depend on scheduling order or concurrency.
package workload

import (
	"time"

	"switchyard.dev/loadtest/internal/openai"
)

// Turn is one request of a session.
type Turn struct {
	Request openai.Request
	// InputTokens is the prompt length in tokens (exact for token-id
	// prompts, a word count for text prompts).
	InputTokens int
	// Delay is the think time to wait before sending this turn.
	Delay time.Duration
}

// Session is a conversation whose turns are sent in order, each after the
// previous one has finished.
type Session interface {
	// ID numbers sessions from 0 in the order the source produced them.
	ID() int
	// At is the session's arrival offset from the start of the run, for
	// sources with their own schedule; zero otherwise.
	At() time.Duration
	// Next returns the next turn, given the text the server generated for
	// the previous one; ok is false when the session is over.
	Next(prevReply string) (turn Turn, ok bool)
}

// Source produces sessions. It is not safe for concurrent use.
type Source interface {
	// Next returns the next session; ok is false when the source is
	// exhausted.
	Next() (s Session, ok bool)
	// Timed reports whether sessions carry their own arrival offsets.
	Timed() bool
	// Len is the number of sessions, or -1 when unbounded.
	Len() int
}
