//go:build ucx && cgo

package ucx

/*
#cgo pkg-config: ucx
#include "nx.h"
int nx_failures;
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"switchyard.dev/libs/nixl"
)

// Available reports whether the cgo backend is compiled in.
const Available = true

// notifTag marks notification messages ("NIXL" + 1).
const notifTag = 0x4E49584C_00000001

// New returns a factory for UCX backends.
func New(cfg Config) nixl.BackendFactory {
	return func(env nixl.Env) (nixl.Backend, error) {
		if cfg.Isolate {
			return newIsolated(cfg, env)
		}
		eagerMax := cfg.eagerMax()
		amq := C.nx_am_queue_new(C.size_t(max(eagerMax, 0)), C.int(eagerPool(eagerMax)))
		if amq == nil {
			return nil, errors.New("ucx: out of memory for the write queue")
		}
		w, err := newWorker(cfg)
		if err != nil {
			C.nx_am_queue_free(amq)
			return nil, err
		}
		b := &Backend{env: env, w: w, peerErrs: !cfg.NoPeerErrHandling, oneSided: cfg.OneSidedWrite, eagerMax: eagerMax, amq: amq,
			regs: map[nixl.RegionID]reg{}, conns: map[*conn]struct{}{},
			incoming: map[uint64]*incoming{}, replies: map[string]*conn{}, lingering: map[*conn]struct{}{}}
		b.rbuf = C.malloc(slotSize)
		w.poll = b.poll
		w.checkFailed = b.checkFailed
		w.destroy, w.unmap = b.destroy, b.unmap
		w.release = b.release
		w.start()
		var addrErr error
		w.call(func() {
			if st := status(C.nx_am_listen(w.w, amWrite, b.amq)); st != statusOK {
				addrErr = fmt.Errorf("ucx: write handler: %w", st.err())
				return
			}
			b.addr, addrErr = workerAddress(w.w)
		})
		if addrErr != nil {
			w.stop()
			return nil, addrErr
		}
		return b, nil
	}
}

func workerAddress(w C.ucp_worker_h) ([]byte, error) {
	var addr *C.ucp_address_t
	var n C.size_t
	if st := status(C.ucp_worker_get_address(w, &addr, &n)); st != statusOK {
		return nil, fmt.Errorf("ucx: worker address: %w", st.err())
	}
	defer C.ucp_worker_release_address(w, addr)
	return C.GoBytes(unsafe.Pointer(addr), C.int(n)), nil
}

// Backend is one agent's UCX backend. Fields below w are owned by the
// worker's loop goroutine.
type Backend struct {
	env      nixl.Env
	w        *worker
	addr     []byte
	peerErrs bool
	oneSided bool
	eagerMax int
	tcp      bool // a connection's active messages go over tcp: progress once a poll (nx_progress)

	regs      map[nixl.RegionID]reg
	conns     map[*conn]struct{}
	lingering map[*conn]struct{}   // closed, still sending WRITE data (conn.closeEP)
	incoming  map[uint64]*incoming // WRITEs this agent is the target of, by header key
	amq       *C.nx_am_queue       // WRITE messages the AM callback queued (pollWrites)
	amDropped int                  // amq.dropped last logged
	replies   map[string]*conn     // endpoints to initiators, by address
	rbuf      unsafe.Pointer       // C buffer of slotSize: notifications and stray acks are received here
	slots     []unsafe.Pointer     // free C buffers for WRITEs (getSlot)
	cbufs     []unsafe.Pointer     // C buffers to free after the UCX worker is destroyed

	strayAcks int // acks given up on, perhaps still to arrive (dropStrayAcks)
}

// reg is a registered region.
type reg struct {
	memh C.ucp_mem_h
	base uintptr
	len  int
}

// memh returns the handle of registered region id if it holds [p, p+n),
// else nil (UCX then registers on the fly). The region is the one the
// transfer holds, so its handle outlives the request; another registration
// covering the same bytes (overlapping windows of one arena) may be
// unmapped while the request is in flight.
func (b *Backend) memh(id nixl.RegionID, p unsafe.Pointer, n int) C.ucp_mem_h {
	a := uintptr(p)
	if r, ok := b.regs[id]; ok && a >= r.base && a+uintptr(n) <= r.base+uintptr(r.len) {
		return r.memh
	}
	return nil
}

// Name implements nixl.Backend.
func (b *Backend) Name() string { return Name }

// WireName implements nixl.WireNamer.
func (b *Backend) WireName() string { return WireName }

// Address implements nixl.Backend: the packed UCP worker address.
func (b *Backend) Address() []byte { return b.addr }

// RegisterMemory maps mem with ucp_mem_map and returns its key: the
// region's base address (8 bytes, big endian) then the packed rkey.
func (b *Backend) RegisterMemory(id nixl.RegionID, mem []byte) ([]byte, error) {
	var key []byte
	var err error
	ok := b.w.call(func() {
		var memh C.ucp_mem_h
		var rkey unsafe.Pointer
		var n C.size_t
		base := unsafe.Pointer(unsafe.SliceData(mem))
		if st := status(C.nx_mem_map(b.w.ctx, base, C.size_t(len(mem)), &memh, &rkey, &n)); st != statusOK {
			err = fmt.Errorf("ucx: mem map %d bytes: %w", len(mem), st.err())
			return
		}
		defer C.ucp_rkey_buffer_release(rkey)
		b.regs[id] = reg{memh: memh, base: uintptr(base), len: len(mem)}
		key = binary.BigEndian.AppendUint64(nil, uint64(uintptr(base)))
		key = append(key, C.GoBytes(rkey, C.int(n))...)
	})
	if !ok {
		return nil, nixl.ErrClosed
	}
	return key, err
}

// DeregisterMemory implements nixl.Backend.
func (b *Backend) DeregisterMemory(id nixl.RegionID) error {
	var err error
	ok := b.w.call(func() {
		r, found := b.regs[id]
		if !found {
			err = fmt.Errorf("ucx: %w: %d", nixl.ErrUnknownRegion, id)
			return
		}
		delete(b.regs, id)
		if st := status(C.ucp_mem_unmap(b.w.ctx, r.memh)); st != statusOK {
			err = fmt.Errorf("ucx: mem unmap: %w", st.err())
		}
	})
	if !ok {
		return nixl.ErrClosed
	}
	return err
}

// Connect creates an endpoint to the peer's worker address.
func (b *Backend) Connect(peer nixl.PeerInfo) (nixl.Conn, error) {
	if len(peer.Address) == 0 {
		return nil, fmt.Errorf("ucx: empty worker address for %s", peer.Name)
	}
	var c *conn
	var err error
	ok := b.w.call(func() { c, err = b.connect(peer.Name, peer.Address) })
	if !ok {
		return nil, nixl.ErrClosed
	}
	return c, err
}

// connect creates an endpoint on the loop.
func (b *Backend) connect(name string, address []byte) (*conn, error) {
	c := &conn{b: b, peer: name, rkeys: map[nixl.RegionID]rkey{}, id: newConnID(), writes: map[*wx]struct{}{}}
	addr := C.CBytes(address)
	defer C.free(addr)
	c.failed = (*C.int)(C.calloc(1, C.sizeof_int))
	if st := status(C.nx_ep_create(b.w.w, addr, boolInt(b.peerErrs), c.failed, &c.ep)); st != statusOK {
		C.free(unsafe.Pointer(c.failed))
		return nil, fmt.Errorf("ucx: %w: ep create to %s: %w", nixl.ErrPeerGone, name, st.err())
	}
	c.eagerMax = -1
	if C.nx_ep_am_tcp(c.ep) != 0 {
		c.eagerMax = b.eagerMax
		b.tcp = true
	}
	b.conns[c] = struct{}{}
	return c, nil
}

// Close closes every endpoint, unmaps memory and destroys the worker.
func (b *Backend) Close() error {
	b.w.stop()
	return nil
}

// destroy runs on the loop during shutdown.
func (b *Backend) destroy() {
	for _, in := range b.incoming {
		in.cancel()
	}
	for c := range b.conns {
		c.closeEP()
	}
	for c := range b.lingering { // the worker's end closes its transports
		c.endLinger()
	}
}

// unmap unmaps every registration once shutdown has drained the requests
// (a receive matched before destroy may still be writing through a memh).
func (b *Backend) unmap() {
	for id, r := range b.regs {
		C.ucp_mem_unmap(b.w.ctx, r.memh)
		delete(b.regs, id)
	}
}

// release frees the backend's C buffers once the worker is gone (WRITEs
// still outstanding at destroy hand their slots back while it drains).
func (b *Backend) release() {
	for _, s := range b.slots {
		C.free(s)
	}
	for _, p := range b.cbufs {
		C.free(p)
	}
	b.slots, b.cbufs = nil, nil
	C.free(b.rbuf)
	C.nx_am_queue_free(b.amq)
}

// deliver parses a notification: name length (1 byte), name, message.
func (b *Backend) deliver(data []byte) {
	if len(data) < 1 || len(data) < 1+int(data[0]) {
		b.env.Logger.Warn("nixl ucx: dropping malformed notification", "len", len(data))
		return
	}
	n := int(data[0])
	b.env.Notify(string(data[1:1+n]), data[1+n:])
}

// poll progresses the worker and receives waiting notifications and
// WRITE messages; it reports whether anything happened.
func (b *Backend) poll() bool {
	r := C.nx_progress(b.w.w, boolInt(!b.tcp), notifTag, b.amq, boolInt(b.strayAcks > 0), C.uint64_t(tagAck), C.uint64_t(classMask))
	if r&2 != 0 {
		b.pollNotifs()
	}
	if r&4 != 0 {
		b.pollWrites()
	}
	if r&8 != 0 {
		b.dropStrayAcks()
	}
	return r != 0
}

// pollNotifs receives waiting notifications.
func (b *Backend) pollNotifs() {
	// Each lies in the reused rbuf: deliver hands it to Notify, which copies it.
	b.drainTagged(notifTag, ^uint64(0), b.deliver)
}

// drainTagged receives every waiting message whose tag matches tag under
// mask and hands each to handle, in b.rbuf when it fits there (handle must
// copy what it keeps), then frees a larger one. Messages UCX failed to
// receive are dropped.
func (b *Backend) drainTagged(tag, mask uint64, handle func(msg []byte)) {
	for {
		var buf unsafe.Pointer
		n := C.nx_tag_poll(b.w.w, C.uint64_t(tag), C.uint64_t(mask), b.rbuf, slotSize, &buf)
		if n == -1 {
			return
		}
		if n >= 0 {
			handle(unsafe.Slice((*byte)(buf), int(n)))
		}
		if buf != b.rbuf {
			C.free(buf)
		}
	}
}

func boolInt(v bool) C.int {
	if v {
		return 1
	}
	return 0
}
