package tcp

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"switchyard.dev/libs/nixl"
)

func (b *Backend) accept() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				b.env.Logger.Warn("nixl tcp: accept", "err", err)
			}
			return
		}
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			_ = c.Close()
			return
		}
		b.served[c] = struct{}{}
		b.wg.Add(1)
		b.mu.Unlock()
		go b.serve(c)
	}
}

// serve answers one initiator connection until it closes or misbehaves.
func (b *Backend) serve(c net.Conn) {
	defer b.wg.Done()
	defer func() {
		b.mu.Lock()
		delete(b.served, c)
		b.mu.Unlock()
		_ = c.Close()
	}()
	if tc, ok := c.(*tls.Conn); ok {
		// The handshake comes before any frame: a peer without a
		// trusted certificate is dropped here.
		_ = tc.SetDeadline(time.Now().Add(b.cfg.IOTimeout))
		if err := tc.Handshake(); err != nil {
			b.env.Logger.Warn("nixl tcp: refused a peer at the TLS handshake", "remote", c.RemoteAddr().String(), "err", err)
			return
		}
		_ = tc.SetDeadline(time.Time{})
	}
	s := &session{b: b, c: c, r: bufio.NewReaderSize(c, 256<<10), w: bufio.NewWriterSize(c, 64<<10)}
	// run returns only when the session ends, always with the reason.
	if err := s.run(); !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		b.env.Logger.Debug("nixl tcp: session ended", "peer", s.peer, "err", err)
	}
}

type session struct {
	b    *Backend
	c    net.Conn
	r    *bufio.Reader
	w    *bufio.Writer // responses, flushed before the session waits for input
	peer string
	hdr  [headerLen]byte
}

// readHeader reads the next frame's header. Responses wait in s.w while
// more requests are already buffered, so a burst of small frames is
// answered in a few writes; they are flushed before the session would
// block on the connection.
func (s *session) readHeader() (header, error) {
	if s.r.Buffered() < headerLen && s.w.Buffered() > 0 {
		if err := s.flush(); err != nil {
			return header{}, err
		}
	}
	if _, err := io.ReadFull(s.r, s.hdr[:]); err != nil {
		return header{}, err
	}
	return decodeHeader(s.hdr[:])
}

func (s *session) run() error {
	_ = s.c.SetReadDeadline(time.Now().Add(s.b.cfg.IOTimeout))
	h, err := s.readHeader()
	if err != nil {
		return err
	}
	if h.op != opHello {
		return fmt.Errorf("%w: first frame op %d, want hello", errFrame, h.op)
	}
	name := make([]byte, h.len)
	if _, err := io.ReadFull(s.r, name); err != nil {
		return err
	}
	s.peer = string(name)
	_ = s.c.SetReadDeadline(time.Time{})
	for {
		h, err := s.readHeader()
		if err != nil {
			return err
		}
		if err := s.handle(h); err != nil {
			return err
		}
	}
}

func (s *session) handle(h header) error {
	switch h.op {
	case opWrite:
		return s.write(h)
	case opRead:
		return s.read(h)
	case opNotif:
		msg := make([]byte, h.len)
		if err := s.payload(msg); err != nil {
			return err
		}
		s.b.env.Notify(s.peer, msg)
		return s.respond(h.id, statusOK, nil)
	}
	return fmt.Errorf("%w: unexpected op %d from initiator", errFrame, h.op)
}

// payload reads a frame body; a peer that stalls mid-frame is dropped.
func (s *session) payload(dst []byte) error {
	_ = s.c.SetReadDeadline(time.Now().Add(s.b.cfg.IOTimeout))
	_, err := io.ReadFull(s.r, dst)
	_ = s.c.SetReadDeadline(time.Time{})
	return err
}

func (s *session) write(h header) error {
	mem, release, err := s.b.env.Regions.Acquire(nixl.RegionID(h.region), h.offset, h.len)
	if err != nil {
		// Keep the stream in sync, then refuse.
		_ = s.c.SetReadDeadline(time.Now().Add(s.b.cfg.IOTimeout))
		if _, derr := io.CopyN(io.Discard, s.r, int64(h.len)); derr != nil {
			return derr
		}
		_ = s.c.SetReadDeadline(time.Time{})
		return s.respond(h.id, statusFor(err), nil)
	}
	err = s.payload(mem)
	release()
	if err != nil {
		return err
	}
	return s.respond(h.id, statusOK, nil)
}

func (s *session) read(h header) error {
	mem, release, err := s.b.env.Regions.Acquire(nixl.RegionID(h.region), h.offset, h.len)
	if err != nil {
		return s.respond(h.id, statusFor(err), nil)
	}
	defer release()
	return s.respond(h.id, statusOK, mem)
}

func (s *session) respond(id uint64, status uint16, body []byte) error {
	var hb [headerLen]byte
	(&header{op: opResp, status: status, id: id, len: uint64(len(body))}).put(hb[:])
	if _, err := s.w.Write(hb[:]); err != nil {
		return err
	}
	if len(body) > s.w.Available() {
		// A READ's payload goes out now, straight from the region
		// (bufio writes a large body through without copying it).
		if err := s.flush(); err != nil {
			return err
		}
	}
	_, err := s.w.Write(body)
	return err
}

// flush writes the buffered responses within the I/O timeout.
func (s *session) flush() error {
	_ = s.c.SetWriteDeadline(time.Now().Add(s.b.cfg.IOTimeout))
	return s.w.Flush()
}

func statusFor(err error) uint16 {
	switch {
	case errors.Is(err, nixl.ErrUnknownRegion):
		return statusUnknownRegion
	case errors.Is(err, nixl.ErrOutOfRange):
		return statusOutOfRange
	}
	return statusBadRequest
}

// errFor maps a response status to the error reported on the handle.
func errFor(status uint16) error {
	switch status {
	case statusOK:
		return nil
	case statusUnknownRegion:
		return fmt.Errorf("tcp: %w: %w", nixl.ErrRemote, nixl.ErrUnknownRegion)
	case statusOutOfRange:
		return fmt.Errorf("tcp: %w: %w", nixl.ErrRemote, nixl.ErrOutOfRange)
	}
	return fmt.Errorf("tcp: %w: bad request", nixl.ErrRemote)
}
