// Package leader keeps one planner active: planners are replicated for
// availability, but two acting on the same pools would fight (one adding
// what the other removes). Each planner tries a lock every interval; the
// holder plans and acts, the others only report ("standby"). A file lock
// (flock) serves the local stack, where every planner shares a disk; a
// Consul session lock serves a cluster, where the lock is lost when the
// holder's session expires (it died or was partitioned), so another
// takes over within the session TTL.
package leader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
	"golang.org/x/sys/unix"
)

// Lock is a leader lock.
type Lock interface {
	// TryAcquire takes the lock if it is free. While held, lost stays
	// open; it is closed if the lock is lost (a Consul session expired).
	// held is false when another holder has it.
	TryAcquire(ctx context.Context) (lost <-chan struct{}, held bool, err error)
	// Release gives the lock up.
	Release() error
}

// File is a lock held with flock on a file; the kernel releases it when
// the process dies.
type File struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

// NewFile returns the lock on path (created if missing).
func NewFile(path string) *File { return &File{path: path} }

// TryAcquire implements Lock.
func (l *File) TryAcquire(context.Context) (<-chan struct{}, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		return make(chan struct{}), true, nil
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o755); err != nil {
		return nil, false, fmt.Errorf("leader: %w", err)
	}
	f, err := os.OpenFile(l.path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("leader: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("leader: lock %s: %w", l.path, err)
	}
	l.f = f
	return make(chan struct{}), true, nil // never lost while the process lives
}

// Release implements Lock.
func (l *File) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Consul is a lock on a Consul KV key held through a session.
type Consul struct {
	client *api.Client
	key    string
	ttl    time.Duration
	mu     sync.Mutex
	lock   *api.Lock
	lost   <-chan struct{}
}

// NewConsul returns the lock on key (e.g. "switchyard/planner/leader")
// through the agent at addr; a holder that stops renewing loses it after
// ttl.
func NewConsul(addr, token, key string, ttl time.Duration) (*Consul, error) {
	c, err := api.NewClient(&api.Config{Address: addr, Token: token})
	if err != nil {
		return nil, fmt.Errorf("leader: consul: %w", err)
	}
	return &Consul{client: c, key: key, ttl: ttl}, nil
}

// TryAcquire implements Lock.
func (l *Consul) TryAcquire(context.Context) (<-chan struct{}, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lock != nil {
		select {
		case <-l.lost:
			_ = l.lock.Unlock()
			l.lock = nil
		default:
			return l.lost, true, nil
		}
	}
	lk, err := l.client.LockOpts(&api.LockOptions{Key: l.key, SessionTTL: l.ttl.String(), SessionName: "switchyard-planner",
		LockTryOnce: true, LockWaitTime: time.Second})
	if err != nil {
		return nil, false, fmt.Errorf("leader: consul lock %s: %w", l.key, err)
	}
	lost, err := lk.Lock(nil)
	if err != nil {
		return nil, false, fmt.Errorf("leader: consul lock %s: %w", l.key, err)
	}
	if lost == nil {
		return nil, false, nil // held by another planner
	}
	l.lock, l.lost = lk, lost
	return lost, true, nil
}

// Release implements Lock.
func (l *Consul) Release() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lock == nil {
		return nil
	}
	err := l.lock.Unlock()
	l.lock = nil
	return err
}
