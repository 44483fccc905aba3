// Package local is the same-process nixl backend: a transfer is a memcpy
// between two agents' registered regions.
//
// Agents find each other through a Registry value the caller shares between
// them (no package globals), and the address each publishes names that
// registry, so metadata from another process never resolves here and the
// agent falls through to a network backend.
package local

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"switchyard.dev/libs/nixl"
)

// Name is the backend's identifier in metadata.
const Name = "local"

// chunk bounds each copy so cancellation and peer departure are noticed
// promptly during large transfers.
const chunk = 4 << 20

// Registry connects the local backends of agents in one process.
type Registry struct {
	token  string
	mu     sync.Mutex
	agents map[string]*Backend
}

// NewRegistry returns an empty registry with a unique token.
func NewRegistry() *Registry {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Registry{token: hex.EncodeToString(b[:]), agents: map[string]*Backend{}}
}

func (r *Registry) lookup(name string) *Backend {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.agents[name]
}

// New returns a factory for backends attached to reg.
func New(reg *Registry) nixl.BackendFactory {
	return func(env nixl.Env) (nixl.Backend, error) {
		reg.mu.Lock()
		defer reg.mu.Unlock()
		if _, dup := reg.agents[env.Agent]; dup {
			return nil, fmt.Errorf("local: agent %q already in registry", env.Agent)
		}
		b := &Backend{reg: reg, env: env}
		reg.agents[env.Agent] = b
		return b, nil
	}
}

// Backend is one agent's local backend.
type Backend struct {
	reg *Registry
	env nixl.Env
}

// Name implements nixl.Backend.
func (b *Backend) Name() string { return Name }

// Address implements nixl.Backend: "<registry token>/<agent>".
func (b *Backend) Address() []byte { return []byte(b.reg.token + "/" + b.env.Agent) }

// RegisterMemory implements nixl.Backend; local access needs no key.
func (b *Backend) RegisterMemory(nixl.RegionID, []byte) ([]byte, error) { return nil, nil }

// DeregisterMemory implements nixl.Backend.
func (b *Backend) DeregisterMemory(nixl.RegionID) error { return nil }

// Close removes the backend from the registry; peers' transfers to it then
// fail with ErrPeerGone.
func (b *Backend) Close() error {
	b.reg.mu.Lock()
	defer b.reg.mu.Unlock()
	if b.reg.agents[b.env.Agent] == b {
		delete(b.reg.agents, b.env.Agent)
	}
	return nil
}

// Connect implements nixl.Backend.
func (b *Backend) Connect(peer nixl.PeerInfo) (nixl.Conn, error) {
	token, name, ok := strings.Cut(string(peer.Address), "/")
	if !ok || token != b.reg.token {
		return nil, fmt.Errorf("local: %s is not in this process's registry", peer.Name)
	}
	if b.reg.lookup(name) == nil {
		return nil, fmt.Errorf("local: %w: %s", nixl.ErrPeerGone, name)
	}
	return &conn{self: b, peer: name, closed: make(chan struct{})}, nil
}

type conn struct {
	self      *Backend
	peer      string
	closeOnce sync.Once
	closed    chan struct{}
}

func (c *conn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

func (c *conn) Post(req *nixl.Request) {
	go func() { req.Done(c.run(req)) }()
}

func (c *conn) run(req *nixl.Request) error {
	for _, p := range req.Pairs {
		for off := 0; off < len(p.Local); off += chunk {
			n := min(chunk, len(p.Local)-off)
			if err := c.copyChunk(req, p, off, n); err != nil {
				return err
			}
		}
	}
	if req.Notif != nil {
		peer, err := c.target()
		if err != nil {
			return err
		}
		peer.env.Notify(c.self.env.Agent, req.Notif)
	}
	return nil
}

func (c *conn) target() (*Backend, error) {
	select {
	case <-c.closed:
		return nil, fmt.Errorf("local: %w: connection to %s closed", nixl.ErrPeerGone, c.peer)
	default:
	}
	peer := c.self.reg.lookup(c.peer)
	if peer == nil {
		return nil, fmt.Errorf("local: %w: %s left", nixl.ErrPeerGone, c.peer)
	}
	return peer, nil
}

func (c *conn) copyChunk(req *nixl.Request, p nixl.Pair, off, n int) error {
	if req.IsCanceled() {
		return nixl.ErrCanceled
	}
	peer, err := c.target()
	if err != nil {
		return err
	}
	mem, release, err := peer.env.Regions.Acquire(p.Remote.Region, p.Remote.Offset+uint64(off), uint64(n))
	if err != nil {
		return fmt.Errorf("local: %w: %w", nixl.ErrRemote, err)
	}
	defer release()
	if req.Op == nixl.Write {
		copy(mem, p.Local[off:off+n])
	} else {
		copy(p.Local[off:off+n], mem)
	}
	return nil
}
