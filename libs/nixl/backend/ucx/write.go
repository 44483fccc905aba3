//go:build ucx && cgo

package ucx

/*
#cgo pkg-config: ucx
#include "nx.h"
*/
import "C"

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"unsafe"

	"switchyard.dev/libs/nixl"
)

// Tagged WRITE. UCX 1.13 has no one-sided put on tcp or shared memory: it
// emulates put with active messages that the target must progress, in
// bounce-buffer fragments. Its tag rendezvous instead moves large messages
// zero-copy (cma on shared memory, put/get zcopy on tcp). A WRITE therefore
// goes as:
//
//	initiator                                   target
//	post recv(ack)
//	send hdr {reply address, data tags, pairs} ─► probe hdr, check each pair
//	send data[i] (registered, rendezvous)        against its registrations,
//	                                             post recv(data[i]) into them
//	                                         ◄── all landed: notify, send ack
//	ack received → Done
//
// Tags: bits 60-63 class, 32-59 the initiating connection's random id,
// 0-31 a per-connection sequence number.
const (
	classShift = 60
	classMask  = uint64(0xF) << classShift
	tagHdr     = uint64(0xA) << classShift
	tagData    = uint64(0xB) << classShift
	tagAck     = uint64(0xC) << classShift
	connIDBits = 28
)

// Ack codes sent back by the target.
const (
	ackOK = iota
	ackUnknownRegion
	ackOutOfRange
	ackFailed
)

func newConnID() uint64 { return rand.Uint64N(1<<connIDBits) << 32 }

// wx is an initiated tagged WRITE.
type wx struct {
	c      *conn
	req    *nixl.Request
	left   int // requests not yet finished, +1 while posting
	err    error
	ack    request        // the ack receive while it is outstanding
	slot   unsafe.Pointer // from Backend.getSlot: the ack, then the header
	hdrBuf unsafe.Pointer // the header: in slot, or malloc'd when larger
	gaveUp bool           // the ack receive was canceled
}

// slotSize is the size of the C buffers a WRITE takes its ack and header
// from: 8 bytes of ack, then a header of up to ~200 descriptors (larger
// ones are malloc'd). The backend keeps freed slots for the next WRITE, so
// a WRITE makes no cgo call to allocate or free them.
const (
	slotSize     = 4096
	maxFreeSlots = 256
)

// getSlot returns a C buffer of slotSize bytes (loop goroutine only).
func (b *Backend) getSlot() unsafe.Pointer {
	if n := len(b.slots); n > 0 {
		s := b.slots[n-1]
		b.slots = b.slots[:n-1]
		return s
	}
	return C.malloc(slotSize)
}

// putSlot keeps s for reuse, or frees it beyond maxFreeSlots. While the
// worker shuts down it only keeps it: a WRITE that UCX never finished is
// ended before the UCX worker is destroyed, and its requests may still
// point into the slot until then (release frees it after).
func (b *Backend) putSlot(s unsafe.Pointer) {
	if len(b.slots) < maxFreeSlots || b.w.stopped {
		b.slots = append(b.slots, s)
		return
	}
	C.free(s)
}

// freeCBuf frees a malloc'd buffer a request used, or, while the worker
// shuts down, keeps it for release (see putSlot).
func (b *Backend) freeCBuf(p unsafe.Pointer) {
	if b.w.stopped {
		b.cbufs = append(b.cbufs, p)
		return
	}
	C.free(p)
}

// postWrite issues a tagged WRITE (see above).
func (c *conn) postWrite(req *nixl.Request) {
	w := c.b.w
	c.xseq++
	xseq := uint64(c.xseq)
	dseq := c.dseq
	c.dseq += uint32(len(req.Pairs))

	x := &wx{c: c, req: req, left: 3 + len(req.Pairs), slot: c.b.getSlot()}
	var st C.ucs_status_t
	r := C.nx_tag_recv(w.w, x.slot, 8, C.uint64_t(tagAck|c.id|xseq), nil, &st)
	if status(st) == statusInProgress {
		x.ack = request(r)
		c.writes[x] = struct{}{}
	}
	w.watch(request(r), status(st), func(st status) {
		x.ack = nil
		delete(c.writes, x)
		if st != statusOK {
			x.fail(c.gone(st.err()))
		} else if code := *(*byte)(x.slot); code != ackOK {
			x.fail(ackErr(code))
		}
		x.finish()
	})

	// The header is encoded straight into the slot when it fits.
	in := unsafe.Add(x.slot, 8)
	hdr := c.appendHeader(unsafe.Slice((*byte)(in), slotSize-8)[:0], req, dseq)
	if x.hdrBuf = in; unsafe.Pointer(unsafe.SliceData(hdr)) != in {
		x.hdrBuf = C.CBytes(hdr)
	}
	r = C.nx_tag_send_mem(c.ep, x.hdrBuf, C.size_t(len(hdr)), C.uint64_t(tagHdr|c.id|xseq), nil, &st)
	c.sending++
	w.watch(request(r), status(st), x.sent)
	for i, p := range req.Pairs {
		if x.err != nil { // the peer failed: account for the rest
			x.left -= len(req.Pairs) - i
			break
		}
		buf := unsafe.Pointer(unsafe.SliceData(p.Local))
		r = C.nx_tag_send_mem(c.ep, buf, C.size_t(len(p.Local)), C.uint64_t(tagData|c.id|uint64(dseq+uint32(i))),
			c.b.memh(p.LocalRegion, buf, len(p.Local)), &st)
		c.sending++
		w.watch(request(r), status(st), x.sent)
	}
	x.finish()
}

func (x *wx) sent(st status) {
	if st != statusOK {
		x.fail(x.c.gone(st.err()))
	}
	c := x.c
	if c.sending--; c.sending == 0 && c.lingering {
		c.endLinger()
	}
	x.finish()
}

// fail records the first error and stops waiting for the ack.
func (x *wx) fail(err error) {
	if x.err == nil {
		x.err = err
	}
	if x.ack != nil && !x.gaveUp {
		x.gaveUp = true
		C.nx_cancel(x.c.b.w.w, unsafe.Pointer(x.ack))
		x.c.b.strayAcks++
	}
}

// dropStrayAcks receives the acks of WRITEs that gave up waiting for them
// (their connection closed or failed): with their receive canceled, each
// would otherwise stay in UCX's unexpected queue for the worker's life.
// An ack with a receive posted matches it on arrival, so only strays are
// found here. The progress call looks for them while strayAcks > 0 (a
// probe inside the call it makes anyway); a target that died sends none,
// and its count stays, costing that probe only.
func (b *Backend) dropStrayAcks() {
	b.drainTagged(tagAck, classMask, func([]byte, uint64) { b.strayAcks = max(b.strayAcks-1, 0) })
}

func (x *wx) finish() {
	if x.left--; x.left > 0 {
		return
	}
	if x.hdrBuf != unsafe.Add(x.slot, 8) {
		x.c.b.freeCBuf(x.hdrBuf)
	}
	x.c.b.putSlot(x.slot)
	x.req.Done(x.err)
}

func ackErr(code byte) error {
	switch code {
	case ackUnknownRegion:
		return fmt.Errorf("ucx: %w: %w", nixl.ErrRemote, nixl.ErrUnknownRegion)
	case ackOutOfRange:
		return fmt.Errorf("ucx: %w: %w", nixl.ErrRemote, nixl.ErrOutOfRange)
	}
	return fmt.Errorf("ucx: %w: target failed to receive", nixl.ErrRemote)
}

// appendHeader appends the header of a WRITE of req to h (header.go).
func (c *conn) appendHeader(h []byte, req *nixl.Request, dseq uint32) []byte {
	h = appendHeaderStart(h, c.b.addr, dseq, len(req.Pairs), c.b.env.Agent, req.Notif, req.Notif != nil)
	for _, p := range req.Pairs {
		h = appendHeaderPair(h, p.Remote.Region, p.Remote.Offset, uint64(len(p.Local)))
	}
	return h
}

// incoming is a WRITE this agent is the target of.
type incoming struct {
	b        *Backend
	reply    *conn
	ackTag   uint64
	from     string
	notif    []byte
	hasNtf   bool
	left     int // receives not yet finished, +1 while posting
	code     byte
	releases []func()
	recvs    []request // receives still outstanding (few: one a pair)
	scratch  unsafe.Pointer
}

// pollHeaders accepts waiting WRITE headers.
func (b *Backend) pollHeaders() {
	// Parsed in place: accept copies what it keeps.
	b.drainTagged(tagHdr, classMask, func(msg []byte, stag uint64) {
		if h, err := parseHeader(msg); err != nil {
			b.env.Logger.Warn("nixl ucx: dropping malformed write header", "len", len(msg))
		} else {
			b.accept(stag, h)
		}
	})
}

// accept posts the receives of one incoming WRITE.
func (b *Backend) accept(stag uint64, h header) {
	reply, err := b.replyConn(h.addr)
	if err != nil {
		// Without a way back the initiator learns of it from its endpoint
		// (or its context); the data still has to be drained.
		b.env.Logger.Warn("nixl ucx: no reply endpoint", "from", h.from, "err", err)
	}
	in := &incoming{b: b, reply: reply, ackTag: tagAck | stag&^classMask, from: h.from, notif: bytes.Clone(h.notif), hasNtf: h.hasNtf,
		left: len(h.pairs) + 1}
	b.incoming[in] = struct{}{}
	idBits := stag &^ classMask &^ 0xFFFFFFFF
	for i, p := range h.pairs {
		mem, release, err := b.env.Regions.Acquire(p.region, p.off, p.len)
		var buf unsafe.Pointer
		var memh C.ucp_mem_h
		size := p.len
		if err != nil {
			if in.code == ackOK {
				in.code = ackFailed
				if errors.Is(err, nixl.ErrUnknownRegion) {
					in.code = ackUnknownRegion
				} else if errors.Is(err, nixl.ErrOutOfRange) {
					in.code = ackOutOfRange
				}
			}
			if in.scratch == nil {
				in.scratch = C.malloc(64)
			}
			buf, size = in.scratch, 0 // truncates: the data is dropped
		} else {
			in.releases = append(in.releases, release)
			buf = unsafe.Pointer(unsafe.SliceData(mem))
			memh = b.memh(p.region, buf, len(mem))
		}
		var st C.ucs_status_t
		r := C.nx_tag_recv(b.w.w, buf, C.size_t(size), C.uint64_t(tagData|idBits|uint64(h.dseq+uint32(i))), memh, &st)
		if status(st) == statusInProgress {
			in.recvs = append(in.recvs, request(r))
		}
		rejected := err != nil
		b.w.watch(request(r), status(st), func(st status) {
			if i := slices.Index(in.recvs, request(r)); i >= 0 {
				in.recvs = slices.Delete(in.recvs, i, i+1)
			}
			if st != statusOK && !rejected && in.code == ackOK {
				in.code = ackFailed
			}
			in.finish()
		})
	}
	if reply != nil && reply.alive() != nil {
		// Failed before we looked: the failure scan may already be past.
		in.cancel()
	}
	in.finish()
}

func (in *incoming) finish() {
	if in.left--; in.left > 0 {
		return
	}
	b := in.b
	delete(b.incoming, in)
	for _, release := range in.releases {
		release()
	}
	if in.scratch != nil {
		b.freeCBuf(in.scratch)
	}
	if in.code == ackOK && in.hasNtf {
		b.env.Notify(in.from, in.notif)
	}
	if in.reply == nil || in.reply.alive() != nil {
		return
	}
	var st C.ucs_status_t
	r := C.nx_send_ack(in.reply.ep, C.int(in.code), C.uint64_t(in.ackTag), &st)
	b.w.watch(request(r), status(st), ignoreStatus)
}

// ignoreStatus is the completion of a request nobody waits for.
func ignoreStatus(status) {}

// cancel stops waiting for the rest of the data (the initiator is gone).
func (in *incoming) cancel() {
	for _, r := range in.recvs {
		C.nx_cancel(in.b.w.w, unsafe.Pointer(r))
	}
	in.recvs = nil
}

// replyConn returns the (cached) endpoint to an initiator's worker.
func (b *Backend) replyConn(addr []byte) (*conn, error) {
	if c, ok := b.replies[string(addr)]; ok { // no allocation for the key
		if c.alive() == nil {
			return c, nil
		}
		delete(b.replies, string(addr))
	}
	for k, old := range b.replies { // drop endpoints to initiators UCX saw fail
		if old.alive() != nil {
			old.closeEP()
			delete(b.replies, k)
		}
	}
	c, err := b.connect("initiator", addr)
	if err != nil {
		return nil, err
	}
	b.replies[string(addr)] = c
	return c, nil
}

// checkFailed abandons work tied to endpoints UCX reported as failed: the
// ack an initiator waits for, the data a target waits for.
func (b *Backend) checkFailed() {
	for c := range b.conns {
		if len(c.writes) == 0 || *c.failed == 0 {
			continue
		}
		c.failWrites(c.gone(status(*c.failed).err()))
	}
	for in := range b.incoming {
		if len(in.recvs) > 0 && in.reply != nil && in.reply.alive() != nil {
			in.cancel()
		}
	}
}

// failWrites gives up on the acks of this connection's WRITEs.
func (c *conn) failWrites(err error) {
	for x := range c.writes {
		x.fail(err)
	}
}
