// Package backoff spaces out the attempts of a loop that reconnects or
// retries on a timer: a Consul watch or registration, a KV event stream, a
// restarted process.
//
// The wait after the n-th consecutive failure is drawn uniformly from
// [0, min(Max, Base·2^(n-1))]: capped exponential backoff with full jitter.
// Full jitter, rather than a fixed wait or a small jitter around it,
// because the failures that matter come in herds (a Consul agent restarts
// under every instance of a node, a worker restarts under every router
// following its events): spreading each herd's retries over the whole
// window does the least total work and keeps the callee from seeing them
// in lockstep. Full rather than decorrelated jitter because it depends only
// on the failure count: a loop that already counts failures for its log
// lines keeps no other state, and the bound of every wait is exact, so
// tests and log lines can state it. A wait may come out near zero; the
// ceiling still doubles, so a persistent failure cannot spin.
//
// Randomness comes from an injected Source (a seeded *rand.Rand in tests);
// nil means math/rand/v2's process-wide generator, which is safe for
// concurrent use.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Source draws the jitter; *rand.Rand from math/rand/v2 is one.
type Source interface {
	// Int64N returns a uniform number in [0, n); n > 0.
	Int64N(n int64) int64
}

// Policy is the shape of one loop's waits.
type Policy struct {
	// Base is the ceiling of the first wait.
	Base time.Duration
	// Max caps every ceiling (and so every wait); Max < Base means Base.
	Max time.Duration
}

// maxShift bounds the doubling so that Base<<shift cannot overflow before
// the cap applies (2^30 times any sane Base is past any sane Max).
const maxShift = 30

// Ceiling is the longest wait after the n-th consecutive failure
// (n >= 1; n < 1 counts as 1): Base doubled n-1 times, capped at Max.
func (p Policy) Ceiling(n int) time.Duration {
	if p.Base <= 0 {
		return 0
	}
	limit := max(p.Max, p.Base)
	shift := min(max(n-1, 0), maxShift)
	d := p.Base << shift
	if d <= 0 || d>>shift != p.Base || d > limit { // past the cap, or overflowed
		return limit
	}
	return d
}

// Delay is the wait after the n-th consecutive failure: uniform in
// [0, Ceiling(n)], drawn from r (nil: math/rand/v2).
func (p Policy) Delay(n int, r Source) time.Duration {
	c := p.Ceiling(n)
	if c <= 0 {
		return 0
	}
	if r == nil {
		return time.Duration(rand.Int64N(int64(c) + 1))
	}
	return time.Duration(r.Int64N(int64(c) + 1))
}

// Backoff is a Policy with its failure count: Next after each failure,
// Reset after a success. Not safe for concurrent use; each loop has its
// own.
type Backoff struct {
	Policy
	// Rand draws the jitter; nil means math/rand/v2.
	Rand Source

	failures int
}

// New returns a Backoff of policy p drawing from r (nil: math/rand/v2).
func New(p Policy, r Source) *Backoff { return &Backoff{Policy: p, Rand: r} }

// Next counts one more consecutive failure and returns the wait before
// the next attempt.
func (b *Backoff) Next() time.Duration {
	b.failures++
	return b.Delay(b.failures, b.Rand)
}

// Reset forgets the failures: the next wait is drawn from the first
// ceiling again.
func (b *Backoff) Reset() { b.failures = 0 }

// Failures is the number of consecutive failures counted since the last
// Reset.
func (b *Backoff) Failures() int { return b.failures }

// Wait counts a failure, sleeps its wait, and reports whether ctx is
// still live (false: it ended first).
func (b *Backoff) Wait(ctx context.Context) bool { return Sleep(ctx, b.Next()) }

// Sleep waits d and reports whether ctx is still live; it returns at once,
// false, if ctx ends first.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// LogWorthy reports whether the n-th consecutive failure of a loop is
// worth a log line: the first and every tenth, so an outage is reported
// without a line per retry.
func LogWorthy(n int) bool { return n == 1 || n%10 == 0 }
