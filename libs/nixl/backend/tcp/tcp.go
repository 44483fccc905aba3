// Package tcp is the portable nixl backend: pure Go over TCP, always
// available.
//
// Each agent listens on one socket. An initiator opens a small pool of
// connections per peer, splits descriptors into chunks and pipelines them
// across the pool; the target serves READ and WRITE chunks straight from
// and into its registered memory, validating every request against its
// current registrations (a stale or hostile peer gets an error status, never
// a byte outside a region). Every frame from the network is bounds-checked
// before use (frame.go).
//
// With Config.TLS, every connection is mutual TLS: a peer must present a
// certificate the target trusts before the target reads its first frame,
// so an unauthenticated peer never reaches a registered region.
package tcp

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"switchyard.dev/libs/nixl"
)

// Name is the backend's identifier in metadata.
const Name = "tcp"

// Config tunes the backend; zero values take defaults.
type Config struct {
	Addr      string        // listen address, default "127.0.0.1:0"
	Conns     int           // connections per peer, default 4
	ChunkSize int           // bytes per frame, default 1 MiB, at most 64 MiB
	Window    int           // chunks in flight per transfer, default 16
	IOTimeout time.Duration // a peer silent this long with work pending is gone; default 30s
	// TLS, if set, authenticates both ends of every connection.
	TLS *TLS
}

// TLS is the backend's mutual TLS: the same certificates the services
// use for their RPCs (libs/mesh/tlsconf provides both fields).
type TLS struct {
	// Server configures the listener; it must require and verify client
	// certificates (tls.RequireAndVerifyClientCert), or an unauthenticated
	// peer could write.
	Server *tls.Config
	// Client returns the configuration of one connection to serverName
	// (the host of the peer's address), with this agent's certificate.
	Client func(serverName string) (*tls.Config, error)
}

func (c Config) withDefaults() Config {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:0"
	}
	if c.Conns <= 0 {
		c.Conns = 4
	}
	if c.ChunkSize <= 0 || c.ChunkSize > maxChunk {
		c.ChunkSize = 1 << 20
	}
	if c.Window <= 0 {
		c.Window = 16
	}
	if c.IOTimeout <= 0 {
		c.IOTimeout = 30 * time.Second
	}
	return c
}

// New returns a factory for tcp backends.
func New(cfg Config) nixl.BackendFactory {
	cfg = cfg.withDefaults()
	return func(env nixl.Env) (nixl.Backend, error) {
		if cfg.TLS != nil && (cfg.TLS.Server == nil || cfg.TLS.Client == nil) {
			return nil, errors.New("tcp: TLS needs both a server and a client configuration")
		}
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("tcp: listen %s: %w", cfg.Addr, err)
		}
		if cfg.TLS != nil {
			ln = tls.NewListener(ln, cfg.TLS.Server)
		}
		b := &Backend{cfg: cfg, env: env, ln: ln, served: map[net.Conn]struct{}{}, pools: map[*pool]struct{}{}}
		b.wg.Add(1)
		go b.accept()
		return b, nil
	}
}

// Backend is one agent's tcp backend.
type Backend struct {
	cfg Config
	env nixl.Env
	ln  net.Listener
	wg  sync.WaitGroup

	mu     sync.Mutex
	closed bool
	served map[net.Conn]struct{}
	pools  map[*pool]struct{}
}

// Name implements nixl.Backend.
func (b *Backend) Name() string { return Name }

// Address implements nixl.Backend: the listener's host:port.
func (b *Backend) Address() []byte { return []byte(b.ln.Addr().String()) }

// RegisterMemory implements nixl.Backend; the target resolves regions by
// id, so no key is needed.
func (b *Backend) RegisterMemory(nixl.RegionID, []byte) ([]byte, error) { return nil, nil }

// DeregisterMemory implements nixl.Backend.
func (b *Backend) DeregisterMemory(nixl.RegionID) error { return nil }

// Connect dials the peer's pool; a peer that cannot be reached fails here.
func (b *Backend) Connect(peer nixl.PeerInfo) (nixl.Conn, error) {
	p, err := dialPool(b, peer)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		p.Close()
		return nil, nixl.ErrClosed
	}
	b.pools[p] = struct{}{}
	return p, nil
}

func (b *Backend) forget(p *pool) {
	b.mu.Lock()
	delete(b.pools, p)
	b.mu.Unlock()
}

// Close stops serving, closes every connection and waits for the serving
// goroutines, so registered memory is no longer touched when it returns.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	for c := range b.served {
		_ = c.Close()
	}
	pools := b.pools
	b.pools = nil
	b.mu.Unlock()
	err := b.ln.Close()
	for p := range pools {
		_ = p.Close()
	}
	b.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
