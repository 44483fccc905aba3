package auth

import (
	"context"
	"math"
	"sync"
	"time"
)

// Limits bound one key's use; a zero field is unlimited.
type Limits struct {
	// RequestsPerSecond refills the key's request bucket, of RequestBurst
	// requests (default max(1, ceil(RequestsPerSecond))).
	RequestsPerSecond float64
	RequestBurst      int
	// TokensPerMinute refills the key's token bucket, of one minute's
	// tokens: a request is admitted while the bucket is not empty and
	// charged its prompt and completion tokens when it ends, so a key
	// overshoots by at most what its requests in flight use.
	TokensPerMinute float64
	// Concurrent bounds the key's requests in flight.
	Concurrent int
}

func (l Limits) burst() float64 {
	if l.RequestBurst > 0 {
		return float64(l.RequestBurst)
	}
	return math.Max(1, math.Ceil(l.RequestsPerSecond))
}

// Limiter keeps the limits' state per key id (the key's SHA-256): in
// this process (NewLocal), or in Redis, shared by every frontend replica
// (NewRedis).
type Limiter interface {
	// Admit takes a request for id under l. It returns a release to call
	// when the request ends, or, when a limit is reached, how long until
	// it may be retried.
	Admit(ctx context.Context, id [32]byte, l Limits) (release func(), retry time.Duration, err error)
	// Charge takes tokens from id's token bucket.
	Charge(ctx context.Context, id [32]byte, l Limits, tokens int64) error
}

// concurrentRetry is the Retry-After of a request refused for the key's
// requests in flight: when one ends is unknown.
const concurrentRetry = time.Second

// local is a Limiter of this process's own.
type local struct {
	now func() time.Time

	mu   sync.Mutex
	keys map[[32]byte]*keyState
}

type keyState struct {
	reqs, toks bucket
	inflight   int
}

// bucket is a token bucket refilled continuously.
type bucket struct {
	tokens float64
	last   time.Time
	init   bool
}

// level refills b at rate per second up to size and returns its tokens.
func (b *bucket) level(now time.Time, rate, size float64) float64 {
	if !b.init {
		b.tokens, b.last, b.init = size, now, true
	}
	b.tokens = math.Min(size, b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	return b.tokens
}

// NewLocal returns a Limiter keeping its state in this process; now is
// its clock (nil: time.Now).
func NewLocal(now func() time.Time) Limiter {
	if now == nil {
		now = time.Now
	}
	return &local{now: now, keys: map[[32]byte]*keyState{}}
}

func (l *local) Admit(_ context.Context, id [32]byte, lim Limits) (func(), time.Duration, error) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(id)
	if r := lim.RequestsPerSecond; r > 0 {
		if t := s.reqs.level(now, r, lim.burst()); t < 1 {
			return nil, time.Duration((1 - t) / r * float64(time.Second)), nil
		}
	}
	if r := lim.TokensPerMinute; r > 0 {
		if t := s.toks.level(now, r/60, r); t <= 0 {
			return nil, time.Duration((1 - t) / (r / 60) * float64(time.Second)), nil
		}
	}
	if lim.Concurrent > 0 && s.inflight >= lim.Concurrent {
		return nil, concurrentRetry, nil
	}
	if lim.RequestsPerSecond > 0 {
		s.reqs.tokens--
	}
	s.inflight++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			s.inflight--
			l.mu.Unlock()
		})
	}, 0, nil
}

func (l *local) Charge(_ context.Context, id [32]byte, lim Limits, tokens int64) error {
	if lim.TokensPerMinute <= 0 || tokens <= 0 {
		return nil
	}
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.state(id)
	s.toks.level(now, lim.TokensPerMinute/60, lim.TokensPerMinute)
	s.toks.tokens -= float64(tokens)
	return nil
}

// state is id's state, made on first use; l.mu is held.
func (l *local) state(id [32]byte) *keyState {
	s := l.keys[id]
	if s == nil {
		s = &keyState{}
		l.keys[id] = s
	}
	return s
}
