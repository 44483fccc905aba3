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

// WRITE. UCX 1.13 has no one-sided put on tcp or shared memory: it
// emulates put with active messages that the target must progress, in
// bounce-buffer fragments. Its rendezvous instead moves large messages
// zero-copy (cma on shared memory, put/get zcopy on tcp). A WRITE
// therefore goes as one UCX active message per descriptor pair, whose
// header (header.go) names the pair's destination and whose data is the
// pair's bytes:
//
//	initiator                                   target
//	post recv(ack)
//	am send {hdr[i], data[i]} (registered) ────► the AM callback queues it;
//	                                             the loop checks the
//	                                             destination against its
//	                                             registrations and receives
//	                                             the data straight into it
//	                                         ◄── all landed: notify, send ack
//	ack received → Done
//
// The header rides in the rendezvous request (or the eager message), so
// a WRITE costs the initiator one message a pair plus the ack, as
// ucx_perftest's tag_bw costs one a message. The ack is a tagged message
// whose tag is tagAck | the header's key: bits 32-59 the initiating
// connection's random id, 0-31 its WRITE sequence number.
const (
	classShift = 60
	classMask  = uint64(0xF) << classShift
	tagAck     = uint64(0xC) << classShift
	connIDBits = 28
	// amWrite is the active message id of WRITE messages.
	amWrite = 0x5759 // "WY"
)

// Ack codes sent back by the target.
const (
	ackOK = iota
	ackUnknownRegion
	ackOutOfRange
	ackFailed
)

func newConnID() uint64 { return rand.Uint64N(1<<connIDBits) << 32 }

// wx is an initiated WRITE.
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

// slotSize is the size of the C buffers a WRITE takes its ack and headers
// from: 8 bytes of ack, then index 0's header and 28 bytes for each further
// pair's, about 130 pairs (the headers of larger WRITEs are malloc'd). The backend keeps freed slots for the next WRITE, so
// a WRITE makes no cgo call to allocate or free them.
const (
	slotSize     = 4096
	maxFreeSlots = 256
)

// eagerPool is how many freed eager receive buffers (Config.EagerMax
// bytes each) a target keeps for the next eager messages: a window of
// WRITEs in flight to it, and at most eagerPoolBytes.
func eagerPool(eagerMax int) int {
	const buffers, eagerPoolBytes = 64, 4 << 20
	if eagerMax <= 0 {
		return 0
	}
	return max(1, min(buffers, eagerPoolBytes/eagerMax))
}

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

// postWrite issues a WRITE (see above).
func (c *conn) postWrite(req *nixl.Request) {
	w := c.b.w
	c.xseq++
	key := c.id | uint64(c.xseq)
	msgs := max(len(req.Pairs), 1) // a notification-only WRITE is one message

	x := &wx{c: c, req: req, left: 2 + msgs, slot: c.b.getSlot()}
	var st C.ucs_status_t
	r := C.nx_tag_recv(w.w, x.slot, 8, C.uint64_t(tagAck|key), nil, &st)
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

	// The headers, index 0's first, are encoded straight into the slot
	// when they fit; UCX reads them until each send completes.
	in := unsafe.Add(x.slot, 8)
	h := header{key: key, count: uint32(len(req.Pairs)), addr: c.b.addr, from: c.b.env.Agent, notif: req.Notif, hasNtf: req.Notif != nil}
	if len(req.Pairs) > 0 {
		h.region, h.off = req.Pairs[0].Remote.Region, req.Pairs[0].Remote.Offset
	}
	hdrs := appendHeader(unsafe.Slice((*byte)(in), slotSize-8)[:0], &h)
	first := len(hdrs)
	for i := 1; i < len(req.Pairs); i++ {
		h.index, h.region, h.off = uint32(i), req.Pairs[i].Remote.Region, req.Pairs[i].Remote.Offset
		hdrs = appendHeader(hdrs, &h)
	}
	if x.hdrBuf = in; unsafe.Pointer(unsafe.SliceData(hdrs)) != in {
		x.hdrBuf = C.CBytes(hdrs)
	}
	sent := x.sent // one closure for every message's completion
	for i := range msgs {
		if x.err != nil { // the peer failed: account for the rest
			x.left -= msgs - i
			break
		}
		hdr, hlen := x.hdrBuf, first
		if i > 0 {
			hdr, hlen = unsafe.Add(x.hdrBuf, first+(i-1)*pairHeaderBytes), pairHeaderBytes
		}
		var buf unsafe.Pointer
		var n int
		var memh C.ucp_mem_h
		if len(req.Pairs) > 0 {
			p := req.Pairs[i]
			buf, n = unsafe.Pointer(unsafe.SliceData(p.Local)), len(p.Local)
			memh = c.b.memh(p.LocalRegion, buf, n)
		}
		r = C.nx_am_send(c.ep, amWrite, hdr, C.size_t(hlen), buf, C.size_t(n), memh, boolInt(n <= c.eagerMax), &st)
		c.sending++
		w.watch(request(r), status(st), sent)
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
	b.drainTagged(tagAck, classMask, func([]byte) { b.strayAcks = max(b.strayAcks-1, 0) })
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

// incoming is a WRITE this agent is the target of.
type incoming struct {
	b        *Backend
	key      uint64 // the headers' key: the ack's tag is tagAck | key
	count    uint32
	reply    *conn // from index 0's reply address; nil before it or without a way back
	meta     bool  // index 0 has arrived
	arrived  int   // of left's count, what has arrived (abandon counts the rest)
	gone     bool  // abandoned: the initiator is gone
	from     string
	notif    []byte
	hasNtf   bool
	left     int // pairs not yet landed, +1 until index 0 has arrived
	code     byte
	releases []func()
	recvs    []request // rendezvous receives still outstanding
	release1 [1]func()
	recv1    [1]request
}

// pollWrites handles the WRITE messages the AM callback queued during the
// last progress call.
func (b *Backend) pollWrites() {
	q := b.amq
	// Read q afresh each time: UCX calls made below could in principle
	// run the callback, which appends (and may move the arrays).
	for i := 0; i < int(q.n); i++ { //nolint:intrange // q.n may grow while the loop runs
		m := *(*C.nx_am_msg)(unsafe.Add(unsafe.Pointer(q.msgs), uintptr(i)*C.sizeof_nx_am_msg))
		// Parsed in place: receive copies what it keeps before any UCX call.
		h, err := parseHeader(unsafe.Slice((*byte)(unsafe.Add(unsafe.Pointer(q.hbuf), m.hoff)), int(m.hlen)))
		if err != nil {
			b.env.Logger.Warn("nixl ucx: dropping malformed write message", "header", int(m.hlen), "err", err)
			b.dropData(m)
			continue
		}
		b.receive(&h, m)
	}
	q.n, q.hlen = 0, 0
	if d := int(q.dropped); d != b.amDropped {
		b.env.Logger.Error("nixl ucx: write messages dropped: out of memory queueing them", "total", d)
		b.amDropped = d
	}
}

// dropData releases a message's data without receiving it.
func (b *Backend) dropData(m C.nx_am_msg) {
	switch {
	case m.data == nil:
	case m.rndv != 0:
		C.ucp_am_data_release(b.w.w, m.data)
	default:
		C.nx_pool_put(b.amq, m.data, m.len)
	}
}

// receive checks one message's destination against this agent's
// registrations and receives its data there. UCX delivers an endpoint's
// messages in order, so a WRITE's index 0 arrives first; a later pair
// arriving before it is still received, and the ack waits for index 0.
func (b *Backend) receive(h *header, m C.nx_am_msg) {
	in := b.incoming[h.key]
	switch {
	case in == nil:
		in = &incoming{b: b, key: h.key, count: h.count, left: int(h.count) + 1}
		in.releases, in.recvs = in.release1[:0], in.recv1[:0] // a one-pair WRITE allocates neither
		b.incoming[h.key] = in
	case in.gone: // given up on (abandon): the rest is dropped
		b.dropData(m)
		return
	case h.count != in.count || h.index == 0 && in.meta:
		b.env.Logger.Warn("nixl ucx: dropping write message inconsistent with its write", "index", h.index, "count", h.count)
		b.dropData(m)
		return
	}
	in.arrived++ // its pair, or a notification-only WRITE's fields
	if h.index == 0 && h.count > 0 {
		in.arrived++ // and index 0's fields
	}
	if h.index == 0 {
		in.meta = true
		in.from, in.notif, in.hasNtf = h.from, bytes.Clone(h.notif), h.hasNtf
		reply, err := b.replyConn(h.addr)
		if err != nil {
			// Without a way back the initiator learns of it from its
			// endpoint (or its context); the data still has to be drained.
			b.env.Logger.Warn("nixl ucx: no reply endpoint", "from", h.from, "err", err)
		}
		in.reply = reply
	}
	if h.count > 0 {
		in.land(h, m)
	} else if m.data != nil || m.len > 0 {
		in.reject(ackFailed)
		b.dropData(m)
	}
	if h.index == 0 {
		in.finish() // the WRITE's own fields have arrived
	}
}

// land receives one pair's data into the region it names, or rejects it.
func (in *incoming) land(h *header, m C.nx_am_msg) {
	b := in.b
	if in.reply != nil && in.reply.alive() != nil {
		// The initiator is gone, and the failure scan may be past already.
		in.abandon()
		b.dropData(m)
		in.finish()
		return
	}
	mem, release, err := b.env.Regions.Acquire(h.region, h.off, uint64(m.len))
	switch {
	case err != nil:
		code := byte(ackFailed)
		if errors.Is(err, nixl.ErrUnknownRegion) {
			code = ackUnknownRegion
		} else if errors.Is(err, nixl.ErrOutOfRange) {
			code = ackOutOfRange
		}
		in.reject(code)
		b.dropData(m)
		in.finish()
		return
	case m.data == nil && m.len > 0: // data UCX did not keep for us
		release()
		in.reject(ackFailed)
		in.finish()
		return
	}
	in.releases = append(in.releases, release)
	buf := unsafe.Pointer(unsafe.SliceData(mem))
	if m.rndv == 0 { // eager: the data is here already
		if m.len > 0 {
			copy(mem, unsafe.Slice((*byte)(m.data), int(m.len)))
			b.dropData(m)
		}
		in.finish()
		return
	}
	var st C.ucs_status_t
	r := C.nx_am_recv(b.w.w, m.data, buf, m.len, b.memh(h.region, buf, len(mem)), &st)
	if status(st) == statusInProgress {
		in.recvs = append(in.recvs, request(r))
	}
	b.w.watch(request(r), status(st), func(st status) {
		if i := slices.Index(in.recvs, request(r)); i >= 0 {
			in.recvs = slices.Delete(in.recvs, i, i+1)
		}
		if st != statusOK {
			in.reject(ackFailed)
		}
		in.finish()
	})
}

// reject records the WRITE's first failure.
func (in *incoming) reject(code byte) {
	if in.code == ackOK {
		in.code = code
	}
}

func (in *incoming) finish() {
	if in.left--; in.left > 0 {
		return
	}
	b := in.b
	delete(b.incoming, in.key)
	for _, release := range in.releases {
		release()
	}
	if in.code == ackOK && in.hasNtf {
		b.env.Notify(in.from, in.notif)
	}
	if in.reply == nil || in.reply.alive() != nil {
		return
	}
	var st C.ucs_status_t
	r := C.nx_send_ack(in.reply.ep, C.int(in.code), C.uint64_t(tagAck|in.key), &st)
	b.w.watch(request(r), status(st), ignoreStatus)
}

// ignoreStatus is the completion of a request nobody waits for.
func ignoreStatus(status) {}

// abandon gives up on a WRITE whose initiator is gone: the receives still
// outstanding are canceled, and the messages that have not arrived (and
// now never will) count as ended, so the WRITE ends, releasing the regions
// its landed pairs hold, once the canceled receives complete. Messages
// still arriving for it are dropped.
func (in *incoming) abandon() {
	if in.gone {
		return
	}
	in.gone = true
	in.reject(ackFailed)
	in.cancel()
	missing := int(in.count) + 1 - in.arrived
	in.arrived += missing
	for range missing {
		in.finish()
	}
}

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
	for _, in := range b.incoming { // finish may delete in: allowed in a range
		if in.reply != nil && in.reply.alive() != nil {
			in.abandon()
		}
	}
}

// failWrites gives up on the acks of this connection's WRITEs.
func (c *conn) failWrites(err error) {
	for x := range c.writes {
		x.fail(err)
	}
}
