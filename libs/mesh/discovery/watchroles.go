package discovery

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"switchyard.dev/libs/mesh/backoff"
)

// rewatch spaces the attempts to watch again a role whose watch ended
// before its context.
var rewatch = backoff.Policy{Base: 100 * time.Millisecond, Max: 10 * time.Second}

// WatchRole calls fn with the healthy instances of role, first at once and
// then on every change, until ctx ends. It is WatchRoles for one role.
func WatchRole(ctx context.Context, reg Registry, log *slog.Logger, role string, fn func([]Instance)) error {
	return WatchRoles(ctx, reg, log, []string{role}, func(latest map[string][]Instance) {
		fn(latest[role])
	})
}

// WatchRoles follows several roles as one: it calls fn with the latest
// healthy instances of every role, keyed by role, each time any of them
// changes, until ctx ends. A role is missing from the map until its watch
// first reports, so len(latest) == len(roles) once every role has; callers
// that must not act on a partial view (dropping workers of a role not seen
// yet) check that.
//
// fn runs on one goroutine, never concurrently with itself, and not after
// ctx ends; it owns the map it gets. A slow fn only misses intermediate
// states, never the latest one.
//
// WatchRoles returns once every watch is set up, or with the first error
// (the watches it started are stopped). A watch that later ends before ctx
// does is set up again with capped, jittered backoff (package backoff),
// logging the first and every tenth failure; meanwhile the role's last
// instances stay in force.
func WatchRoles(ctx context.Context, reg Registry, log *slog.Logger, roles []string, fn func(latest map[string][]Instance)) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	chans := make([]<-chan []Instance, len(roles))
	for i, role := range roles {
		ch, err := reg.Watch(ctx, role)
		if err != nil {
			cancel()
			return fmt.Errorf("discovery: watch %s: %w", role, err)
		}
		chans[i] = ch
	}
	m := &merged{reg: reg, log: log, latest: make(map[string][]Instance, len(roles)), wake: make(chan struct{}, 1)}
	for i, role := range roles {
		go m.follow(ctx, role, chans[i])
	}
	go func() {
		defer cancel()
		m.deliver(ctx, fn)
	}()
	return nil
}

// merged is the state WatchRoles shares between its per-role followers and
// the goroutine that calls fn.
type merged struct {
	reg  Registry
	log  *slog.Logger
	wake chan struct{} // capacity 1: a change not yet delivered

	mu     sync.Mutex
	latest map[string][]Instance
}

func (m *merged) set(role string, ins []Instance) {
	m.mu.Lock()
	m.latest[role] = ins
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

func (m *merged) deliver(ctx context.Context, fn func(map[string][]Instance)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		}
		if ctx.Err() != nil {
			return
		}
		m.mu.Lock()
		latest := maps.Clone(m.latest)
		m.mu.Unlock()
		fn(latest)
	}
}

// follow forwards one role's watch until ctx ends, watching again when the
// backend closes the channel early.
func (m *merged) follow(ctx context.Context, role string, ch <-chan []Instance) {
	b := backoff.New(rewatch, nil)
	for {
		for ins := range ch {
			b.Reset()
			m.set(role, ins)
		}
		if ctx.Err() != nil {
			return
		}
		err := fmt.Errorf("discovery: watch %s ended early", role)
		for {
			wait := b.Next()
			if backoff.LogWorthy(b.Failures()) {
				m.log.Warn("discovery watch failed; watching again", "role", role, "failures", b.Failures(), "retry_in", wait, "err", err)
			}
			if !backoff.Sleep(ctx, wait) {
				return
			}
			if ch, err = m.reg.Watch(ctx, role); err == nil {
				break
			}
		}
	}
}
