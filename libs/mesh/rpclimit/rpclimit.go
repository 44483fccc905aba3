// Package rpclimit holds the bounds every RPC in the mesh runs under, so
// that servers (libs/mesh/server) and clients (libs/mesh/client) agree on
// them and one pair of flags (libs/mesh/config) moves both.
//
// Every message has a size limit, both ways: a peer that sends too much
// gets ResourceExhausted instead of costing the receiver unbounded memory.
// The default is sized by the largest message the mesh sends on purpose,
// a worker's GetModelInfo answer, which carries the model's tokenizer
// file (a few MiB for the models served today; a large-vocabulary
// tokenizer.json is up to a few tens of MiB).
//
// Every unary call has a deadline: a caller's own, else UnaryTimeout,
// applied by the client and again by the handler, so a forgotten timeout
// can pin neither end. Streams get none here: a generation lasts as long
// as it lasts, and it ends when its caller goes away; a peer that vanished
// is found by the HTTP/2 pings of libs/mesh/client.
package rpclimit

import "time"

// DefaultMaxMessageBytes is the default bound of one RPC message.
const DefaultMaxMessageBytes = 64 << 20

// DefaultUnaryTimeout is the default deadline of a unary call whose caller
// set none.
const DefaultUnaryTimeout = 30 * time.Second

// Limits are the bounds of one service's RPCs.
type Limits struct {
	// MaxMessageBytes bounds one message, sent or received (default
	// DefaultMaxMessageBytes).
	MaxMessageBytes int
	// UnaryTimeout is the deadline of a unary call whose caller set none
	// (default DefaultUnaryTimeout).
	UnaryTimeout time.Duration
}

// WithDefaults returns l with every unset bound at its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxMessageBytes <= 0 {
		l.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if l.UnaryTimeout <= 0 {
		l.UnaryTimeout = DefaultUnaryTimeout
	}
	return l
}
