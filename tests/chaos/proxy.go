package chaos

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections from its own address to a target, and
// partitions them on demand. A worker advertises the proxy's address, so
// every peer (routers subscribing to its KV events, frontends streaming
// generations) reaches it through the proxy only.
//
// A partition is a blackhole, the way a lost network path behaves: bytes
// stop flowing both ways on every open connection, and new connections are
// accepted but never reach the target, so peers see silence rather than a
// refusal, and must notice it with their own timeouts (HTTP/2 pings).
// Nothing is dropped: what was read while partitioned is delivered after
// Heal, as TCP delivers retransmitted segments once a path is back.
type Proxy struct {
	target string
	ln     net.Listener

	mu      sync.Mutex
	blocked bool
	healed  chan struct{} // closed at Heal; replaced at Partition
	conns   map[net.Conn]struct{}
}

// NewProxy listens on addr (host:port) and forwards to target.
func NewProxy(addr, target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, healed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(p.healed)
	go p.serve()
	return p, nil
}

// Addr is where the proxy listens.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Partition starts blackholing.
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.blocked {
		p.blocked, p.healed = true, make(chan struct{})
	}
}

// Heal ends the partition; held bytes and connections go on.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.blocked {
		p.blocked = false
		close(p.healed)
	}
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.Heal()
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	return err
}

// gate returns once the proxy is not partitioned, or ctx ends.
func (p *Proxy) gate(ctx context.Context) error {
	p.mu.Lock()
	healed := p.healed
	p.mu.Unlock()
	select {
	case <-healed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *Proxy) handle(client net.Conn) {
	p.track(client, true)
	defer p.track(client, false)
	defer client.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if p.gate(ctx) != nil {
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	p.track(server, true)
	defer p.track(server, false)
	defer server.Close()
	// Either direction ending (a close, a reset, the partition's cut)
	// ends both: the deferred closes stop the other copy. Why it ended
	// is the peers' business, not the proxy's.
	done := make(chan struct{}, 2)
	go func() { _ = p.pipe(ctx, server, client); done <- struct{}{} }()
	go func() { _ = p.pipe(ctx, client, server); done <- struct{}{} }()
	<-done
}

// pipe copies src to dst, holding each chunk while partitioned.
func (p *Proxy) pipe(ctx context.Context, dst, src net.Conn) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if gerr := p.gate(ctx); gerr != nil {
				return gerr
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
