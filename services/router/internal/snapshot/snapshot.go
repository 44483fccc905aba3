// Package snapshot persists the router's radix index so a restarted router
// resumes each worker's event stream after the sequence it had applied,
// instead of asking every worker for a full dump.
//
// A Saver writes the index snapshot (which carries every worker's next
// sequence number) periodically and once more on shutdown. Storage is a
// small Store interface: Redis in production, a map in unit tests. A store
// that is down never stops routing: saves fail, are logged (the first and
// every tenth failure), and succeed again once the store is back.
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"switchyard.dev/libs/mesh/backoff"
)

// Store keeps one blob per key.
type Store interface {
	// Load returns the blob, or nil and no error when there is none.
	Load(ctx context.Context, key string) ([]byte, error)
	Save(ctx context.Context, key string, data []byte) error
}

// Redis is a Store over a Redis server.
type Redis struct{ c *redis.Client }

// NewRedis returns a store for the server at addr (host:port). It does not
// connect yet.
func NewRedis(addr string) *Redis {
	return &Redis{c: redis.NewClient(&redis.Options{
		Addr: addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
		MaxRetries: 1, PoolSize: 2,
	})}
}

// Load implements Store.
func (r *Redis) Load(ctx context.Context, key string) ([]byte, error) {
	b, err := r.c.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: redis get %q: %w", key, err)
	}
	return b, nil
}

// Save implements Store.
func (r *Redis) Save(ctx context.Context, key string, data []byte) error {
	if err := r.c.Set(ctx, key, data, 0).Err(); err != nil {
		return fmt.Errorf("snapshot: redis set %q: %w", key, err)
	}
	return nil
}

// Close closes the connections.
func (r *Redis) Close() error { return r.c.Close() }

// Saver saves Source() under Key every Interval until its context ends,
// then once more.
type Saver struct {
	Store    Store
	Key      string
	Interval time.Duration
	Source   func() []byte
	Logger   *slog.Logger
}

// Run saves every Interval until ctx ends. The shutdown's save is Final,
// which the caller runs once the work that changes the index has stopped
// (and waits for: a save left to a goroutine is cut off by the exit).
func (s *Saver) Run(ctx context.Context) {
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.save(ctx, max(s.Interval, time.Second)); err != nil && ctx.Err() == nil {
			failures++
			if backoff.LogWorthy(failures) {
				s.Logger.Warn("index snapshot failed; routing continues, retrying", "key", s.Key, "err", err, "failures", failures)
			}
		} else if err == nil && failures > 0 {
			s.Logger.Info("index snapshots resumed", "key", s.Key, "after_failures", failures)
			failures = 0
		}
	}
}

// finalTimeout bounds the shutdown's save.
const finalTimeout = 2 * time.Second

// Final makes the shutdown's save, bounded by ctx and finalTimeout;
// a failure is logged.
func (s *Saver) Final(ctx context.Context) {
	if err := s.save(ctx, finalTimeout); err != nil {
		s.Logger.Warn("final index snapshot failed", "key", s.Key, "err", err)
	}
}

// save saves once, bounded by timeout.
func (s *Saver) save(ctx context.Context, timeout time.Duration) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return s.Store.Save(cctx, s.Key, s.Source())
}
