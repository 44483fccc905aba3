//go:build ucx && cgo

package ucx

import (
	"context"
	"encoding/gob"
	"encoding/json"
	"errors"
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
	regs *nixl.Regions // the parent's registered regions, as mapped here

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
		files: map[uint32]*arena.Arena{}, conns: map[uint64]nixl.Conn{}, cancels: map[uint64]chan struct{}{}, regs: nixl.NewRegions()}
	cfg.Config.Isolate = false
	env := nixl.Env{Agent: cfg.Agent, Logger: log, Regions: c.regs, Notify: func(from string, msg []byte) {
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
		if err := c.regs.Add(m.Region, mem); err != nil {
			c.reply(m.Seq, nil, err)
			return nil
		}
		key, err := c.b.RegisterMemory(m.Region, mem)
		if err != nil {
			_ = c.regs.Remove(context.Background(), m.Region) // nothing holds it yet
		}
		c.reply(m.Seq, key, err)
	case opDeregister:
		// Waiting for WRITEs that are landing must not hold up the
		// messages behind it.
		go func(seq uint64, id nixl.RegionID) {
			ctx, cancel := context.WithTimeout(context.Background(), deregisterWait)
			defer cancel()
			err := c.regs.Remove(ctx, id)
			switch {
			case errors.Is(err, nixl.ErrUnknownRegion):
				c.reply(seq, nil, err)
				return
			case err != nil: // UCX may still write there; the parent's deregistration goes on
				c.log.Warn("deregistering a region with accesses in flight", "region", id, "err", err)
			}
			c.reply(seq, nil, c.b.DeregisterMemory(id))
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
	var releases []func()
	done := func(err error) {
		for _, r := range releases {
			r()
		}
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
		mem, release, err := c.regs.Acquire(p.Region, p.Off, p.Len)
		if err != nil {
			done(fmt.Errorf("ucx: local buffer %d: %w", i, err))
			return
		}
		releases = append(releases, release)
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
