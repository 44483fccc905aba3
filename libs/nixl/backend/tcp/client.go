package tcp

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"switchyard.dev/libs/nixl"
)

// chunk is one frame's worth of a transfer, owned by a wire connection
// from enqueue until done is called.
type chunk struct {
	op     op
	region uint32
	offset uint64
	buf    []byte // source for writes and notifs, destination for reads
	done   func(error)
}

// payload is how many bytes follow the chunk's header on the wire: none
// for a READ request, which names the bytes it wants.
func (ch *chunk) payload() int {
	if ch.op == opRead {
		return 0
	}
	return len(ch.buf)
}

// wire is one pooled TCP connection: a writer goroutine sends queued
// chunks, a reader goroutine completes them as responses arrive.
type wire struct {
	c       net.Conn
	timeout time.Duration

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []*chunk
	pending map[uint64]*chunk
	nextID  uint64
	err     error // set once the connection is dead
}

func dialWire(addr, self string, timeout time.Duration, tlsc *TLS) (*wire, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, fmt.Errorf("tcp: %w: dial %s: %w", nixl.ErrPeerGone, addr, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if tlsc != nil {
		if c, err = handshake(c, addr, timeout, tlsc); err != nil {
			return nil, err
		}
	}
	var hb [headerLen]byte
	(&header{op: opHello, len: uint64(len(self))}).put(hb[:])
	_ = c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := (&net.Buffers{hb[:], []byte(self)}).WriteTo(c); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("tcp: %w: hello to %s: %w", nixl.ErrPeerGone, addr, err)
	}
	w := &wire{c: c, timeout: timeout, pending: map[uint64]*chunk{}}
	w.cond = sync.NewCond(&w.mu)
	go w.writeLoop()
	go w.readLoop()
	return w, nil
}

// handshake makes c a client TLS connection to addr, verified and
// authenticated as tlsc says, within timeout.
func handshake(c net.Conn, addr string, timeout time.Duration, tlsc *TLS) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("tcp: peer address %q: %w", addr, err)
	}
	cfg, err := tlsc.Client(host)
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("tcp: TLS to %s: %w", addr, err)
	}
	cfg = cfg.Clone()
	cfg.NextProtos = nil // not HTTP: offer no ALPN protocol
	tc := tls.Client(c, cfg)
	_ = tc.SetDeadline(time.Now().Add(timeout))
	if err := tc.Handshake(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("tcp: %w: TLS handshake with %s: %w", nixl.ErrPeerGone, addr, err)
	}
	_ = tc.SetDeadline(time.Time{})
	return tc, nil
}

func (w *wire) enqueue(chs ...*chunk) {
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		for _, ch := range chs {
			ch.done(err)
		}
		return
	}
	w.queue = append(w.queue, chs...)
	w.mu.Unlock()
	w.cond.Signal()
}

// fail kills the connection and fails every queued and pending chunk.
func (w *wire) fail(err error) {
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return
	}
	w.err = fmt.Errorf("tcp: %w: %w", nixl.ErrPeerGone, err)
	failed := w.queue
	w.queue = nil
	for _, ch := range w.pending {
		failed = append(failed, ch)
	}
	w.pending = nil
	w.mu.Unlock()
	w.cond.Broadcast()
	_ = w.c.Close()
	for _, ch := range failed {
		ch.done(w.err)
	}
}

// writeLoop sends the queued chunks, all that are queued at once (up to
// batchChunks or batchBytes) in one vectored write: with many small
// chunks queued, a system call carries many frames.
func (w *wire) writeLoop() {
	hdrs := make([]byte, 0, batchChunks*headerLen)
	var batch []*chunk
	var bufs net.Buffers
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && w.err == nil {
			w.cond.Wait()
		}
		if w.err != nil {
			w.mu.Unlock()
			return
		}
		batch, hdrs = batch[:0], hdrs[:0]
		size := 0
		for len(w.queue) > 0 && len(batch) < batchChunks && (len(batch) == 0 || size+w.queue[0].payload() <= batchBytes) {
			ch := w.queue[0]
			w.queue[0] = nil
			w.queue = w.queue[1:]
			w.nextID++
			w.pending[w.nextID] = ch
			batch = append(batch, ch)
			h := header{op: ch.op, region: ch.region, id: w.nextID, offset: ch.offset, len: uint64(len(ch.buf))}
			hdrs = hdrs[:len(hdrs)+headerLen]
			h.put(hdrs[len(hdrs)-headerLen:])
			size += ch.payload()
		}
		if len(w.queue) == 0 {
			w.queue = nil // let the drained backing array go
		}
		// Work is outstanding: a silent peer must now time out.
		_ = w.c.SetReadDeadline(time.Now().Add(w.timeout))
		w.mu.Unlock()

		bufs = bufs[:0]
		for i, ch := range batch {
			bufs = append(bufs, hdrs[i*headerLen:(i+1)*headerLen])
			if ch.payload() > 0 {
				bufs = append(bufs, ch.buf)
			}
		}
		_ = w.c.SetWriteDeadline(time.Now().Add(w.timeout))
		v := bufs // WriteTo consumes v; bufs keeps the backing array
		if _, err := v.WriteTo(w.c); err != nil {
			w.fail(err)
			return
		}
		clear(batch)
		clear(bufs)
	}
}

// A write batch is at most batchChunks frames and, past its first frame,
// batchBytes of payload.
const (
	batchChunks = 256
	batchBytes  = 4 << 20
)

func (w *wire) readLoop() {
	r := bufio.NewReaderSize(w.c, 256<<10)
	var hb [headerLen]byte
	for {
		if _, err := io.ReadFull(r, hb[:]); err != nil {
			w.fail(err)
			return
		}
		h, err := decodeHeader(hb[:])
		if err == nil && h.op != opResp {
			err = fmt.Errorf("%w: op %d from target", errFrame, h.op)
		}
		if err != nil {
			w.fail(err)
			return
		}
		if err := w.complete(r, h); err != nil {
			w.fail(err)
			return
		}
	}
}

// complete matches a response to its chunk and reads any payload straight
// into the chunk's buffer. The chunk leaves pending before its payload is
// read, so the reader alone owns it from then on: a fail meanwhile (a
// write error, Close, Invalidate) cannot end the transfer, and release
// its buffer, while the payload is still being copied into it.
func (w *wire) complete(r io.Reader, h header) error {
	w.mu.Lock()
	ch, ok := w.pending[h.id]
	delete(w.pending, h.id)
	w.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: response to unknown request %d", errFrame, h.id)
	}
	res := errFor(h.status)
	var err error
	switch {
	case res != nil && h.len != 0:
		err = fmt.Errorf("%w: payload on an error response", errFrame)
	case res == nil && ch.op == opRead && h.len != uint64(len(ch.buf)):
		err = fmt.Errorf("%w: read response of %d bytes, want %d", errFrame, h.len, len(ch.buf))
	case res == nil && ch.op != opRead && h.len != 0:
		err = fmt.Errorf("%w: payload on a write response", errFrame)
	case res == nil && ch.op == opRead:
		_, err = io.ReadFull(r, ch.buf)
	}
	if err != nil {
		ch.done(fmt.Errorf("tcp: %w: %w", nixl.ErrPeerGone, err))
		return err
	}
	w.mu.Lock()
	switch {
	case w.pending == nil: // failed meanwhile
	case len(w.pending) == 0: // idle: no deadline
		_ = w.c.SetReadDeadline(time.Time{})
	default:
		_ = w.c.SetReadDeadline(time.Now().Add(w.timeout))
	}
	w.mu.Unlock()
	ch.done(res)
	return nil
}

func (w *wire) close() { w.fail(net.ErrClosed) }
