// Package auth checks API keys and rate-limits requests per key.
//
// Keys are optional: with none configured every request is anonymous and
// shares one rate-limit bucket. Keys are kept only as SHA-256 digests and
// compared by digest, so lookup time does not depend on how much of a
// guessed key matches.
package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"math"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"switchyard.dev/services/frontend/internal/openai"
)

// Config configures a Guard.
type Config struct {
	// Keys are the accepted API keys; empty disables authentication.
	Keys []string
	// Rate is the sustained requests per second per key; 0 is unlimited.
	Rate float64
	// Burst is the bucket size; it defaults to max(1, ceil(Rate)).
	Burst int
	// Now is the clock, for tests.
	Now func() time.Time
}

// Guard authenticates and rate-limits requests; it is safe for concurrent
// use.
type Guard struct {
	cfg  Config
	keys map[[32]byte]bool

	mu      sync.Mutex
	buckets map[[32]byte]*bucket
}

// New returns a Guard.
func New(cfg Config) *Guard {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Burst <= 0 {
		cfg.Burst = max(1, int(math.Ceil(cfg.Rate)))
	}
	g := &Guard{cfg: cfg, keys: make(map[[32]byte]bool), buckets: make(map[[32]byte]*bucket)}
	for _, k := range cfg.Keys {
		g.keys[sha256.Sum256([]byte(k))] = true
	}
	return g
}

// Check authenticates r and takes one token from its key's bucket. It
// returns nil to let the request through, or a 401 or 429 *openai.Error.
func (g *Guard) Check(r *http.Request) *openai.Error {
	var id [32]byte // anonymous
	if len(g.keys) > 0 {
		key, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			return openai.Unauthorized("Missing API key: send it as 'Authorization: Bearer <key>'.")
		}
		id = sha256.Sum256([]byte(key))
		if !g.keys[id] {
			return openai.Unauthorized("Incorrect API key provided.")
		}
	}
	if g.cfg.Rate <= 0 {
		return nil
	}
	if wait := g.take(id); wait > 0 {
		return openai.RateLimited(wait)
	}
	return nil
}

func bearer(h string) (string, bool) {
	scheme, key, ok := strings.Cut(h, " ")
	key = strings.TrimSpace(key)
	return key, ok && strings.EqualFold(scheme, "Bearer") && key != ""
}

// bucket is a token bucket refilled continuously at Rate per second.
type bucket struct {
	tokens float64
	last   time.Time
}

// take removes a token and returns 0, or how long until one is available.
func (g *Guard) take(id [32]byte) time.Duration {
	now := g.cfg.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	b, ok := g.buckets[id]
	if !ok {
		b = &bucket{tokens: float64(g.cfg.Burst), last: now}
		g.buckets[id] = b
	}
	b.tokens = min(float64(g.cfg.Burst), b.tokens+now.Sub(b.last).Seconds()*g.cfg.Rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) / g.cfg.Rate * float64(time.Second))
}

// LoadKeys reads keys from a file (one per line; blank lines and lines
// starting with # are skipped) and from a comma-separated list (the
// SWITCHYARD_API_KEYS variable). Either may be empty.
func LoadKeys(path, list string) ([]string, error) {
	var keys []string
	for k := range strings.SplitSeq(list, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	if path == "" {
		return keys, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("api keys: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("api keys %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("api keys %s: no keys in file", path)
	}
	return keys, nil
}
