package tcp

import (
	"errors"
	"sync"

	"switchyard.dev/libs/nixl"
)

// pool is the nixl.Conn to one peer: a fixed set of wires that chunks are
// spread over round-robin.
type pool struct {
	b     *Backend
	peer  string
	wires []*wire
	next  uint64
	mu    sync.Mutex
}

func dialPool(b *Backend, peer nixl.PeerInfo) (*pool, error) {
	p := &pool{b: b, peer: peer.Name}
	for range b.cfg.Conns {
		w, err := dialWire(string(peer.Address), b.env.Agent, b.cfg.IOTimeout)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.wires = append(p.wires, w)
	}
	return p, nil
}

func (p *pool) pick() *wire {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	return p.wires[p.next%uint64(len(p.wires))]
}

// Close implements nixl.Conn.
func (p *pool) Close() error {
	for _, w := range p.wires {
		w.close()
	}
	p.b.forget(p)
	return nil
}

// Post implements nixl.Conn.
func (p *pool) Post(req *nixl.Request) {
	go func() { req.Done(p.run(req)) }()
}

// run issues req's chunks with at most Window in flight, waits for all of
// them, then sends the notification. It returns only when no chunk can
// still touch the local buffers.
func (p *pool) run(req *nixl.Request) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, p.b.cfg.Window)
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return first != nil }
	done := func(err error) {
		if err != nil {
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
		}
		<-sem
		wg.Done()
	}
	o := opWrite
	if req.Op == nixl.Read {
		o = opRead
	}
	size := p.b.cfg.ChunkSize
issue:
	for _, pr := range req.Pairs {
		for off := 0; off < len(pr.Local); off += size {
			select {
			case sem <- struct{}{}:
			case <-req.Canceled:
				break issue
			}
			if failed() || req.IsCanceled() {
				<-sem
				break issue
			}
			n := min(size, len(pr.Local)-off)
			wg.Add(1)
			p.pick().enqueue(&chunk{op: o, region: uint32(pr.Remote.Region), offset: pr.Remote.Offset + uint64(off),
				buf: pr.Local[off : off+n], done: done})
		}
	}
	wg.Wait()
	switch {
	case first != nil:
		return first
	case req.IsCanceled():
		return nixl.ErrCanceled
	case req.Notif != nil:
		return p.notify(req.Notif)
	}
	return nil
}

func (p *pool) notify(msg []byte) error {
	if len(msg) > maxNotif {
		return errors.New("tcp: notification larger than 1 MiB")
	}
	res := make(chan error, 1)
	p.pick().enqueue(&chunk{op: opNotif, buf: msg, done: func(err error) { res <- err }})
	return <-res
}
