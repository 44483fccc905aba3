package s3tier

import (
	"errors"
	"sync"
	"time"
)

// errBackingOff is returned while the breaker is open.
var errBackingOff = errors.New("store failing, backing off")

// breaker fails calls fast for a while after consecutive failures: a
// store that is down must not make every onboarding wait for a timeout.
type breaker struct {
	mu       sync.Mutex
	failures int
	until    time.Time
}

// breakerAfter failures in a row open the breaker for breakerFor.
const (
	breakerAfter = 3
	breakerFor   = 2 * time.Second
)

func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Now().After(b.until)
}

func (b *breaker) ok() {
	b.mu.Lock()
	b.failures = 0
	b.mu.Unlock()
}

func (b *breaker) fail() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	if b.failures >= breakerAfter {
		b.until = time.Now().Add(breakerFor)
		b.failures = 0
	}
}
