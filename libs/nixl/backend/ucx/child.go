//go:build ucx && cgo

package ucx

import (
	"encoding/gob"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
)

// A program that uses Config.Isolate starts itself again as its UCX
// process; this init takes that process over before main runs, as
// re-executing programs do (the environment variable is set only there).
func init() {
	if conf, ok := os.LookupEnv(childEnv); ok {
		os.Exit(serveChild(conf))
	}
}

// deregisterWait bounds how long the UCX process waits for WRITEs still
// landing in a region before it unmaps the region's UCX registration.
const deregisterWait = 10 * time.Second

// child is the UCX process: the in-process backend, driven by messages.
type child struct {
	b    nixl.Backend
	log  *slog.Logger
	fds  *net.UnixConn
	wmu  sync.Mutex
	enc  *gob.Encoder
	regs childRegions

	files map[uint32]*arena.Arena // the parent's memory files, mapped for good
	conns map[uint64]nixl.Conn

	cmu     sync.Mutex
	cancels map[uint64]chan struct{}
}

func serveChild(conf string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("process", "nixl-ucx")
	var cfg childConfig
	if err := json.Unmarshal([]byte(conf), &cfg); err != nil {
		log.Error("bad configuration", "err", err)
		return 2
	}
	ctl, err := net.FileConn(os.NewFile(3, "ctl"))
	if err != nil {
		log.Error("control socket", "err", err)
		return 2
	}
	fc, err := net.FileConn(os.NewFile(4, "fds"))
	if err != nil {
		log.Error("file socket", "err", err)
		return 2
	}
	c := &child{log: log, fds: fc.(*net.UnixConn), enc: gob.NewEncoder(ctl),
		files: map[uint32]*arena.Arena{}, conns: map[uint64]nixl.Conn{}, cancels: map[uint64]chan struct{}{}}
	c.regs.init()
	cfg.Config.Isolate = false
	env := nixl.Env{Agent: cfg.Agent, Logger: log, Regions: &c.regs, Notify: func(from string, msg []byte) {
		c.send(&wmsg{Op: opNotify, Peer: from, Data: append([]byte(nil), msg...)})
	}}
	b, err := New(cfg.Config)(env)
	if err != nil {
		m := &wmsg{Op: opHello}
		m.setErr(err)
		c.send(m)
		return 1
	}
	c.b = b
	c.send(&wmsg{Op: opHello, Data: b.Address()})
	dec := gob.NewDecoder(ctl)
	for {
		var m wmsg
		if err := dec.Decode(&m); err != nil { // the parent is gone
			_ = b.Close()
			return 0
		}
		if m.Op == opClose {
			_ = b.Close()
			return 0
		}
		if err := c.handle(&m); err != nil {
			log.Error("giving up", "err", err)
			_ = b.Close()
			return 1
		}
	}
}

func (c *child) send(m *wmsg) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.enc.Encode(m) // the parent gone: the read loop ends next
}

func (c *child) reply(seq uint64, data []byte, err error) {
	m := &wmsg{Op: opReply, Seq: seq, Data: data}
	m.setErr(err)
	c.send(m)
}

// handle serves one message; an error ends the process.
func (c *child) handle(m *wmsg) error {
	switch m.Op {
	case opFile:
		f, err := c.recvFile()
		if err != nil {
			return fmt.Errorf("receiving memory file %d: %w", m.File, err)
		}
		ar, err := arena.MapFile(f, int(m.Len))
		_ = f.Close() // the mapping keeps the memory
		if err != nil {
			return fmt.Errorf("mapping memory file %d: %w", m.File, err)
		}
		c.files[m.File] = ar
	case opRegister:
		f := c.files[m.File]
		if f == nil || m.Off > uint64(len(f.Bytes())) || m.Len > uint64(len(f.Bytes()))-m.Off || m.Len == 0 {
			c.reply(m.Seq, nil, fmt.Errorf("ucx: %w: region %d is not in memory file %d", nixl.ErrOutOfRange, m.Region, m.File))
			return nil
		}
		mem := f.Bytes()[m.Off : m.Off+m.Len : m.Off+m.Len]
		key, err := c.b.RegisterMemory(m.Region, mem)
		if err == nil {
			c.regs.add(m.Region, mem)
		}
		c.reply(m.Seq, key, err)
	case opDeregister:
		// Waiting for WRITEs that are landing must not hold up the
		// messages behind it.
		ok := c.regs.remove(m.Region)
		go func(seq uint64, id nixl.RegionID) {
			err := fmt.Errorf("ucx: %w: %d", nixl.ErrUnknownRegion, id)
			if ok {
				c.regs.wait(id, deregisterWait)
				err = c.b.DeregisterMemory(id)
			}
			c.reply(seq, nil, err)
		}(m.Seq, m.Region)
	case opConnect:
		conn, err := c.b.Connect(nixl.PeerInfo{Name: m.Peer, Address: m.Data})
		if err == nil {
			c.conns[m.Conn] = conn
		}
		c.reply(m.Seq, nil, err)
	case opCloseConn:
		if conn := c.conns[m.Conn]; conn != nil {
			delete(c.conns, m.Conn)
			_ = conn.Close()
		}
	case opPost:
		c.post(m)
	case opCancel:
		c.cmu.Lock()
		if ch := c.cancels[m.Seq]; ch != nil {
			delete(c.cancels, m.Seq)
			close(ch)
		}
		c.cmu.Unlock()
	}
	return nil
}

// post starts a transfer of the parent's on its connection.
func (c *child) post(m *wmsg) {
	seq := m.Seq
	canceled := make(chan struct{})
	c.cmu.Lock()
	c.cancels[seq] = canceled
	c.cmu.Unlock()
	done := func(err error) {
		c.cmu.Lock()
		delete(c.cancels, seq)
		c.cmu.Unlock()
		d := &wmsg{Op: opDone, Seq: seq}
		d.setErr(err)
		c.send(d)
	}
	conn := c.conns[m.Conn]
	if conn == nil {
		done(fmt.Errorf("ucx: %w: connection closed", nixl.ErrPeerGone))
		return
	}
	req := &nixl.Request{Op: m.XOp, Pairs: make([]nixl.Pair, len(m.Pairs)), Canceled: canceled, Done: done}
	if m.HasNtf {
		req.Notif = m.Notif
		if req.Notif == nil {
			req.Notif = []byte{}
		}
	}
	for i, p := range m.Pairs {
		mem, ok := c.regs.slice(p.Region, p.Off, p.Len)
		if !ok {
			done(fmt.Errorf("ucx: %w: local buffer %d: region %d [%d,+%d)", nixl.ErrOutOfRange, i, p.Region, p.Off, p.Len))
			return
		}
		req.Pairs[i] = nixl.Pair{Local: mem, LocalRegion: p.Region, Remote: p.Remote}
	}
	conn.Post(req)
}

// recvFile receives the memory file the parent sent beside an opFile.
func (c *child) recvFile() (*os.File, error) {
	oob := make([]byte, syscall.CmsgSpace(4))
	_, oobn, _, _, err := c.fds.ReadMsgUnix(make([]byte, 1), oob)
	if err != nil {
		return nil, err
	}
	msgs, err := syscall.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, err
	}
	if len(msgs) != 1 {
		return nil, fmt.Errorf("%d control messages, want the file", len(msgs))
	}
	fds, err := syscall.ParseUnixRights(&msgs[0])
	if err != nil {
		return nil, err
	}
	if len(fds) != 1 {
		return nil, fmt.Errorf("%d files in the message, want 1", len(fds))
	}
	return os.NewFile(uintptr(fds[0]), "memfd"), nil
}

// childRegions is the UCX process's nixl.RegionAccess: the parent's
// registered regions, as mapped here, with the accesses in flight so that
// a region is not deregistered under a WRITE that is landing.
type childRegions struct {
	mu    sync.Mutex
	cond  *sync.Cond
	regs  map[nixl.RegionID]*childRegion
	going map[nixl.RegionID]*childRegion // removed, accesses still in flight
}

type childRegion struct {
	mem  []byte
	refs int
}

func (r *childRegions) init() {
	r.cond = sync.NewCond(&r.mu)
	r.regs = map[nixl.RegionID]*childRegion{}
	r.going = map[nixl.RegionID]*childRegion{}
}

func (r *childRegions) add(id nixl.RegionID, mem []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.regs[id] = &childRegion{mem: mem}
}

// slice is a range of a registered region.
func (r *childRegions) slice(id nixl.RegionID, off, n uint64) ([]byte, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.regs[id]
	if g == nil || off > uint64(len(g.mem)) || n > uint64(len(g.mem))-off {
		return nil, false
	}
	return g.mem[off : off+n : off+n], true
}

// Acquire implements nixl.RegionAccess.
func (r *childRegions) Acquire(id nixl.RegionID, off, n uint64) ([]byte, func(), error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.regs[id]
	if g == nil {
		return nil, nil, fmt.Errorf("%w: %d", nixl.ErrUnknownRegion, id)
	}
	if off > uint64(len(g.mem)) || n > uint64(len(g.mem))-off {
		return nil, nil, fmt.Errorf("%w: [%d,+%d) of %d", nixl.ErrOutOfRange, off, n, len(g.mem))
	}
	g.refs++
	var once sync.Once
	return g.mem[off : off+n : off+n], func() {
		once.Do(func() {
			r.mu.Lock()
			g.refs--
			r.mu.Unlock()
			r.cond.Broadcast()
		})
	}, nil
}

// remove takes id out of service: Acquire refuses it from now on.
func (r *childRegions) remove(id nixl.RegionID) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.regs[id]
	if g == nil {
		return false
	}
	delete(r.regs, id)
	r.going[id] = g
	return true
}

// wait waits, at most d, for the accesses to removed region id to end.
func (r *childRegions) wait(id nixl.RegionID, d time.Duration) {
	t := time.AfterFunc(d, r.cond.Broadcast)
	defer t.Stop()
	deadline := time.Now().Add(d)
	r.mu.Lock()
	defer r.mu.Unlock()
	for g := r.going[id]; g != nil && g.refs > 0 && time.Now().Before(deadline); {
		r.cond.Wait()
	}
	delete(r.going, id)
}
