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
		w, err := dialWire(string(peer.Address), b.env.Agent, b.cfg.IOTimeout, b.cfg.TLS)
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

// run issues req's chunks within the transfer's window, waits for all of
// them, then sends the notification. It returns only when no chunk can
// still touch the local buffers.
//
// Chunks go to the wires in groups (up to groupChunks chunks or a chunk's
// worth of bytes), so a transfer of many small descriptors, such as a KV
// import of hundreds of small blocks, costs a few system calls per group
// rather than several per descriptor; a group is handed over as soon as
// the window would make it wait, so the window never stalls on chunks
// still being grouped.
func (p *pool) run(req *nixl.Request) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	win := newWindow(p.b.cfg.Window, p.b.cfg.ChunkSize)
	failed := func() bool { mu.Lock(); defer mu.Unlock(); return first != nil }
	o := opWrite
	if req.Op == nixl.Read {
		o = opRead
	}
	size := p.b.cfg.ChunkSize
	var group []*chunk
	groupBytes := 0
	flush := func() {
		if len(group) > 0 {
			p.pick().enqueue(group...)
			group, groupBytes = nil, 0
		}
	}
issue:
	for _, pr := range req.Pairs {
		for off := 0; off < len(pr.Local); off += size {
			n := min(size, len(pr.Local)-off)
			t := win.tokens(n)
			if !win.tryAcquire(t) {
				flush()
				if !win.acquire(t, req.Canceled) {
					break issue
				}
			}
			if failed() || req.IsCanceled() {
				win.release(t)
				break issue
			}
			wg.Add(1)
			group = append(group, &chunk{op: o, region: uint32(pr.Remote.Region), offset: pr.Remote.Offset + uint64(off),
				buf: pr.Local[off : off+n], done: func(err error) {
					if err != nil {
						mu.Lock()
						if first == nil {
							first = err
						}
						mu.Unlock()
					}
					win.release(t)
					wg.Done()
				}})
			if groupBytes += n; len(group) >= groupChunks || groupBytes >= size {
				flush()
			}
		}
	}
	flush()
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

// groupChunks bounds a group of chunks handed to one wire at once.
const groupChunks = 64

// window bounds a transfer's chunks in flight by bytes: Config.Window
// chunks of ChunkSize, in tokens of tokenDiv of a chunk, so that many
// small chunks (a token each) can be in flight where few large ones
// could. A buffered channel of tokens, so a cancelled transfer stops
// waiting.
type window struct {
	sem  chan struct{}
	unit int
}

const tokenDiv = 64

func newWindow(chunks, chunkSize int) *window {
	return &window{sem: make(chan struct{}, chunks*tokenDiv), unit: max(chunkSize/tokenDiv, 1)}
}

// tokens is what a chunk of n bytes takes: at least one.
func (w *window) tokens(n int) int { return max((n+w.unit-1)/w.unit, 1) }

// tryAcquire takes t tokens if they are all free now.
func (w *window) tryAcquire(t int) bool {
	if cap(w.sem)-len(w.sem) < t {
		return false
	}
	for range t { // only this goroutine acquires, so they stay free
		w.sem <- struct{}{}
	}
	return true
}

// acquire takes t tokens, waiting for chunks in flight to release them;
// false (holding none) if canceled closes first.
func (w *window) acquire(t int, canceled <-chan struct{}) bool {
	for i := range t {
		select {
		case w.sem <- struct{}{}:
		case <-canceled:
			w.release(i)
			return false
		}
	}
	return true
}

func (w *window) release(t int) {
	for range t {
		<-w.sem
	}
}

func (p *pool) notify(msg []byte) error {
	if len(msg) > maxNotif {
		return errors.New("tcp: notification larger than 1 MiB")
	}
	res := make(chan error, 1)
	p.pick().enqueue(&chunk{op: opNotif, buf: msg, done: func(err error) { res <- err }})
	return <-res
}
