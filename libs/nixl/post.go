package nixl

import (
	"errors"
	"fmt"

	"switchyard.dev/libs/nixl/metadata"
)

// LoadRemoteMetadata decodes a peer's blob and remembers it under the
// peer's name, replacing earlier metadata of that name (a restarted peer),
// unless the loaded one is a later generation of the same run: a stale blob
// is ignored. The connection is made on the first transfer.
func (a *Agent) LoadRemoteMetadata(blob []byte) (string, error) {
	md, err := metadata.Decode(blob)
	if err != nil {
		return "", fmt.Errorf("nixl: load remote metadata: %w", err)
	}
	return md.Name, a.LoadRemoteAgent(md)
}

// LoadRemoteAgent is LoadRemoteMetadata for metadata already decoded (a
// caller that vetted it first); the agent keeps md, which the caller must
// not change afterwards.
func (a *Agent) LoadRemoteAgent(md *metadata.Agent) error {
	if md.Name == a.name {
		return fmt.Errorf("nixl: remote metadata carries our own name %q", md.Name)
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return ErrClosed
	}
	old := a.peers[md.Name]
	if old != nil && old.md.Newer(md) {
		// An older blob of the same run, overtaken in flight by a newer one
		// (two requests carried them concurrently): keep the newer.
		a.mu.Unlock()
		return nil
	}
	p := &peer{md: md}
	if old != nil && old.conn != nil {
		if sameEndpoint(md, old.md, wireName(old.backend)) {
			p.conn, p.backend = old.conn, old.backend // same endpoint: keep the connection
			old = nil
		}
	}
	a.peers[md.Name] = p
	a.mu.Unlock()
	if old != nil && old.conn != nil {
		_ = old.conn.Close()
	}
	a.log.Debug("nixl: loaded remote metadata", "peer", md.Name, "regions", len(md.Regions))
	return nil
}

// sameEndpoint reports whether a and b give one address on backend.
func sameEndpoint(a, b *metadata.Agent, backend string) bool {
	x, okA := a.Backend(backend)
	y, okB := b.Backend(backend)
	return okA && okB && string(x) == string(y)
}

// Invalidate forgets a peer: its connection is closed and transfers in
// flight to it fail with ErrPeerGone. Unknown names are ignored.
func (a *Agent) Invalidate(name string) {
	a.mu.Lock()
	p := a.peers[name]
	delete(a.peers, name)
	a.mu.Unlock()
	if p != nil && p.conn != nil {
		_ = p.conn.Close()
	}
}

// Post validates req and starts it. Validation errors are returned here;
// errors after that are reported on the handle. A request whose Peer is
// the agent's own name moves bytes between its memory and its storage
// (RegisterStorage).
func (a *Agent) Post(req XferRequest) (*Xfer, error) {
	if req.Op != Read && req.Op != Write {
		return nil, fmt.Errorf("nixl: invalid op %v", req.Op)
	}
	if len(req.Notif) > MaxNotif {
		return nil, fmt.Errorf("nixl: notification of %d bytes > %d", len(req.Notif), MaxNotif)
	}
	if len(req.Local) != len(req.Remote) {
		return nil, fmt.Errorf("%w: %d local vs %d remote descriptors", ErrLenMismatch, len(req.Local), len(req.Remote))
	}
	a.mu.Lock()
	p, ok := a.peers[req.Peer]
	closed := a.closed
	a.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if req.Peer == a.name {
		return a.postStorage(req)
	}
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownPeer, req.Peer)
	}
	if err := checkRemote(p.md, req); err != nil {
		return nil, err
	}
	conn, be, err := a.connect(req.Peer, p)
	if err != nil {
		return nil, err
	}
	br := &Request{Op: req.Op, Notif: req.Notif, Pairs: make([]Pair, 0, len(req.Local))}
	wire := wireName(be) // the name its region keys are published under
	var releases []func()
	releaseAll := func() {
		for _, r := range releases {
			r()
		}
	}
	for i, l := range req.Local {
		if l.Len == 0 {
			continue
		}
		mem, release, err := a.regions.Acquire(l.Region, l.Offset, l.Len)
		if err != nil {
			releaseAll()
			return nil, fmt.Errorf("nixl: local descriptor %d: %w", i, err)
		}
		releases = append(releases, release)
		r := req.Remote[i]
		reg, _ := p.md.Region(uint32(r.Region))
		br.Pairs = append(br.Pairs, Pair{Local: mem, LocalRegion: l.Region, Remote: RemoteDesc{Region: r.Region, Offset: r.Offset, Key: reg.Key(wire)}})
	}
	x := newXfer(func(err error) {
		releaseAll()
		if errors.Is(err, ErrPeerGone) {
			a.dropConn(req.Peer, conn)
		}
	})
	br.Canceled = x.cancel
	br.Done = x.finish
	conn.Post(br)
	return x, nil
}

func checkRemote(md *metadata.Agent, req XferRequest) error {
	for i, r := range req.Remote {
		if req.Local[i].Len != r.Len {
			return fmt.Errorf("%w: pair %d: local %d, remote %d bytes", ErrLenMismatch, i, req.Local[i].Len, r.Len)
		}
		reg, ok := md.Region(uint32(r.Region))
		if !ok {
			return fmt.Errorf("%w: remote descriptor %d: region %d of %s", ErrUnknownRegion, i, r.Region, md.Name)
		}
		if !inRange(r.Offset, r.Len, reg.Len) {
			return fmt.Errorf("%w: remote descriptor %d: [%d,+%d) of %d", ErrOutOfRange, i, r.Offset, r.Len, reg.Len)
		}
	}
	return nil
}

// connect returns the peer's connection, choosing a backend on first use:
// the first in preference order that both sides advertise and that
// connects. Dialing holds only this peer's dial lock: a peer that takes
// long to answer (a tcp dial waits up to its I/O timeout) holds up the
// transfers to it, not the agent's other peers and calls.
func (a *Agent) connect(name string, p *peer) (Conn, Backend, error) {
	if c, b, ok := a.connOf(p); ok {
		return c, b, nil
	}
	p.dial.Lock()
	defer p.dial.Unlock()
	if c, b, ok := a.connOf(p); ok { // another Post connected meanwhile
		return c, b, nil
	}
	var errs []error
	for _, b := range a.backends {
		addr, ok := p.md.Backend(wireName(b))
		if !ok || failed(b) {
			continue
		}
		c, err := b.Connect(PeerInfo{Name: name, Address: addr})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b.Name(), err))
			continue
		}
		c, b, err = a.install(name, p, c, b)
		if err == nil {
			a.log.Debug("nixl: connected", "peer", name, "backend", b.Name())
		}
		return c, b, err
	}
	if len(errs) == 0 {
		return nil, nil, fmt.Errorf("%w with %s", ErrNoBackend, name)
	}
	return nil, nil, fmt.Errorf("%w: %s: %w", ErrPeerGone, name, errors.Join(errs...))
}

// install records c, just dialed on backend b, as the connection
// of peer name, which was p when the dial began. Metadata may have been
// reloaded meanwhile (every remote prefill brings a new blob): an entry
// for the same endpoint takes c, or keeps the connection it got another
// way (c is closed). An entry gone (invalidated) or moved to another
// endpoint does not take c, and c is closed rather than leaked.
func (a *Agent) install(name string, p *peer, c Conn, b Backend) (Conn, Backend, error) {
	a.mu.Lock()
	cur := a.peers[name]
	closed := a.closed
	same := cur == p || cur != nil && sameEndpoint(cur.md, p.md, wireName(b))
	var keep Conn
	var keepB Backend
	switch {
	case closed || !same:
	case cur.conn == nil:
		cur.conn, cur.backend = c, b
		keep, keepB = c, b
	default:
		keep, keepB = cur.conn, cur.backend
	}
	a.mu.Unlock()
	switch {
	case closed:
		_ = c.Close()
		return nil, nil, ErrClosed
	case keep == nil:
		_ = c.Close()
		return nil, nil, fmt.Errorf("%w: %s: invalidated or moved while connecting", ErrPeerGone, name)
	case keep != c:
		_ = c.Close()
	}
	return keep, keepB, nil
}

// connOf returns p's connection, if it has one.
func (a *Agent) connOf(p *peer) (Conn, Backend, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return p.conn, p.backend, p.conn != nil
}

// dropConn forgets a broken connection so the next transfer reconnects.
func (a *Agent) dropConn(name string, c Conn) {
	a.mu.Lock()
	p := a.peers[name]
	drop := p != nil && p.conn == c
	if drop {
		p.conn, p.backend = nil, nil
	}
	a.mu.Unlock()
	if drop {
		// Not inline: Done callbacks run on backend goroutines that Close
		// may wait for.
		go func() { _ = c.Close() }()
	}
}

// Backend returns the name of the backend chosen for a peer ("" if none
// yet).
func (a *Agent) Backend(peer string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.peers[peer]; p != nil && p.backend != nil {
		return p.backend.Name()
	}
	return ""
}
