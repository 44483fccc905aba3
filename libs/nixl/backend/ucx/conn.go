//go:build ucx && cgo

package ucx

/*
#cgo pkg-config: ucx
#include "nx.h"
*/
import "C"

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"
	"unsafe"

	"switchyard.dev/libs/nixl"
)

// conn is an endpoint to one peer. All fields are owned by the loop.
type conn struct {
	b      *Backend
	peer   string
	ep     C.ucp_ep_h
	failed *C.int // set by UCX's error callback
	rkeys  map[nixl.RegionID]rkey
	closed bool

	// WRITE state (write.go).
	eagerMax  int    // Config.EagerMax over tcp, else -1 (UCX chooses)
	id        uint64 // random connection id, in bits 32-59 of ack tags
	xseq      uint32 // last WRITE sequence number
	dseq      uint32 // next data message sequence number
	writes    map[*wx]struct{}
	sending   int         // WRITE message sends not yet complete
	lingering bool        // closed, the endpoint stays open until sending is 0
	lingerEnd *time.Timer // force-closes a lingering connection at closeLinger
}

type rkey struct {
	packed []byte
	base   uint64
	h      C.ucp_rkey_h
}

// Post implements nixl.Conn.
func (c *conn) Post(req *nixl.Request) {
	if !c.b.w.do(func() { c.post(req) }) {
		req.Done(nixl.ErrClosed)
	}
}

// Close implements nixl.Conn.
func (c *conn) Close() error {
	c.b.w.do(c.closeEP)
	return nil
}

func (c *conn) gone(why error) error {
	return fmt.Errorf("ucx: %w: %s: %w", nixl.ErrPeerGone, c.peer, why)
}

func (c *conn) alive() error {
	switch {
	case c.closed:
		return c.gone(fmt.Errorf("connection closed"))
	case *c.failed != 0:
		return c.gone(status(*c.failed).err())
	}
	return nil
}

// post issues every pair, then one flush; the flush's completion means all
// of them have completed at the target.
func (c *conn) post(req *nixl.Request) {
	if err := c.alive(); err != nil {
		req.Done(err)
		return
	}
	if req.IsCanceled() {
		req.Done(nixl.ErrCanceled)
		return
	}
	if req.Op == nixl.Write && !c.b.oneSided {
		c.postWrite(req)
		return
	}
	var postErr error
	get := C.int(0)
	if req.Op == nixl.Read {
		get = 1
	}
	for _, p := range req.Pairs {
		rk, err := c.rkey(p.Remote)
		if err != nil {
			postErr = err
			break
		}
		st := status(C.nx_rma(c.ep, get, unsafe.Pointer(unsafe.SliceData(p.Local)), C.size_t(len(p.Local)),
			C.uint64_t(rk.base+p.Remote.Offset), rk.h))
		if st != statusOK {
			postErr = c.gone(st.err())
			break
		}
	}
	var st C.ucs_status_t
	r := C.nx_flush(c.ep, &st)
	c.b.w.watch(request(r), status(st), func(st status) {
		switch {
		case postErr != nil:
			req.Done(postErr)
		case st != statusOK:
			req.Done(c.gone(st.err()))
		case req.Notif != nil && !req.IsCanceled():
			c.notify(req)
		default:
			req.Done(nil)
		}
	})
}

func (c *conn) notify(req *nixl.Request) {
	if err := c.alive(); err != nil {
		req.Done(err)
		return
	}
	self := c.b.env.Agent
	msg := make([]byte, 0, 1+len(self)+len(req.Notif))
	msg = append(append(append(msg, byte(len(self))), self...), req.Notif...)
	buf := C.CBytes(msg)
	var st C.ucs_status_t
	r := C.nx_tag_send(c.ep, buf, C.size_t(len(msg)), notifTag, &st)
	c.b.w.watch(request(r), status(st), func(st status) {
		c.b.freeCBuf(buf) // kept until the worker is gone if UCX never finished it
		if st != statusOK {
			req.Done(c.gone(st.err()))
			return
		}
		req.Done(nil)
	})
}

// rkey unpacks (and caches) the remote key for a region.
func (c *conn) rkey(d nixl.RemoteDesc) (rkey, error) {
	if rk, ok := c.rkeys[d.Region]; ok && bytes.Equal(rk.packed, d.Key) {
		return rk, nil
	}
	if len(d.Key) <= 8 {
		return rkey{}, fmt.Errorf("ucx: %w: region %d has no ucx key", nixl.ErrUnknownRegion, d.Region)
	}
	if old, ok := c.rkeys[d.Region]; ok { // the peer re-registered the id
		C.ucp_rkey_destroy(old.h)
		delete(c.rkeys, d.Region)
	}
	rk := rkey{packed: bytes.Clone(d.Key), base: binary.BigEndian.Uint64(d.Key)}
	packed := C.CBytes(d.Key[8:])
	defer C.free(packed)
	if st := status(C.ucp_ep_rkey_unpack(c.ep, packed, &rk.h)); st != statusOK {
		return rkey{}, fmt.Errorf("ucx: %w: unpack rkey of region %d: %w", nixl.ErrRemote, d.Region, st.err())
	}
	c.rkeys[d.Region] = rk
	return rk, nil
}

// closeLinger bounds how long a closed connection keeps sending the data
// of its WRITEs (see closeEP).
const closeLinger = 5 * time.Second

// closeEP closes the endpoint. WRITEs in flight fail at once (their
// handles end when UCX no longer reads their memory). If their data is
// still being sent, the endpoint stays open until it is, for at most
// closeLinger, as TCP lingers on close: the target may have matched those
// messages already, and UCX cannot cancel a matched rendezvous receive, so
// cutting the data off would leave the target holding the region it lands
// in for as long as this worker lives (the target learns of a gone peer
// only from its endpoint failing). Then it force-closes: UCX cancels what
// is left, whose requests complete with errors.
func (c *conn) closeEP() {
	if c.closed {
		return
	}
	c.closed = true
	delete(c.b.conns, c)
	c.failWrites(c.gone(fmt.Errorf("connection closed")))
	// A stopping worker does not linger: destroying it closes its
	// transports, which the target sees fail.
	if c.sending == 0 || *c.failed != 0 || c.b.w.stopped {
		c.forceClose()
		return
	}
	c.lingering = true
	c.b.lingering[c] = struct{}{}
	c.lingerEnd = time.AfterFunc(closeLinger, func() { c.b.w.do(c.endLinger) })
}

// endLinger force-closes a lingering connection, once.
func (c *conn) endLinger() {
	if c.lingering {
		c.lingering = false
		c.lingerEnd.Stop() // its data was sent first, or this is the timer
		delete(c.b.lingering, c)
		c.forceClose()
	}
}

// forceClose closes the endpoint at once: UCX cancels its outstanding
// requests.
func (c *conn) forceClose() {
	r := C.nx_ep_close(c.ep)
	finish := func(status) {
		for id, rk := range c.rkeys {
			C.ucp_rkey_destroy(rk.h)
			delete(c.rkeys, id)
		}
		// The error callback's argument: UCX may still call it until the
		// worker is destroyed when shutdown gave up on the close.
		c.b.freeCBuf(unsafe.Pointer(c.failed))
	}
	if r == nil {
		finish(statusOK)
		return
	}
	c.b.w.active = append(c.b.w.active, pending{req: request(r), done: finish})
}
