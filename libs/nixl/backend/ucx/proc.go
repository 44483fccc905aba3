//go:build ucx && cgo

package ucx

import (
	"encoding/gob"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
)

// childEnv carries the child's configuration (childConfig as JSON); a
// process started with it is a UCX process, not the program (child.go).
const childEnv = "SWITCHYARD_NIXL_UCX_PROCESS"

// childConfig is what the UCX process needs to build its backend.
type childConfig struct {
	Agent  string
	Config Config
}

// helloTimeout bounds the UCX process's start-up.
const helloTimeout = 30 * time.Second

// closeTimeout bounds how long Close waits for the UCX process to exit
// before it kills it.
const closeTimeout = 10 * time.Second

// isolated is the backend of Config.Isolate: UCX runs in a child process
// (this program again, taken over in its init: child.go) that maps the
// agent's registered memory from its memory files, so it moves the bytes
// in place, and aborts inside UCX end only the child. Then every transfer
// on it fails with ErrPeerGone, the backend reports itself Failed, and
// the agent falls back to its next backend.
type isolated struct {
	env  nixl.Env
	cmd  *exec.Cmd
	ctl  net.Conn
	fds  *net.UnixConn
	addr []byte

	wmu sync.Mutex // serializes enc, and a file with its opFile
	enc *gob.Encoder

	mu      sync.Mutex
	seq     uint64
	calls   map[uint64]chan wmsg
	posts   map[uint64]*post
	regions map[nixl.RegionID]span
	files   map[*os.File]uint32 // memory files the UCX process has mapped (for good)
	fileSeq uint32
	dead    error // the UCX process is gone (Failed), or closing
	ended   bool  // fail has run
	closing bool
	gone    chan struct{} // closed with dead
	exited  chan struct{} // closed once cmd.Wait returns
	exitErr error
}

// span is a registered region's place in this process.
type span struct {
	base uintptr
	len  int
}

// post is a transfer handed to the UCX process.
type post struct {
	req  *nixl.Request
	done chan struct{}
}

func newIsolated(cfg Config, env nixl.Env) (nixl.Backend, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("ucx: finding this program to run UCX in: %w", err)
	}
	conf, err := json.Marshal(childConfig{Agent: env.Agent, Config: cfg})
	if err != nil {
		return nil, err
	}
	ctlP, ctlC, err := socketPair(syscall.SOCK_STREAM)
	if err != nil {
		return nil, err
	}
	fdP, fdC, err := socketPair(syscall.SOCK_DGRAM)
	if err != nil {
		_, _ = ctlP.Close(), ctlC.Close()
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(conf))
	cmd.ExtraFiles = []*os.File{ctlC, fdC} // fds 3 and 4
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// The child exits when its control socket reads EOF, which the kernel
	// gives it when this process dies, however it dies. (Not Pdeathsig:
	// that fires when the thread that started the child exits, which a
	// Go program's threads may do long before the program.)
	err = cmd.Start()
	_, _ = ctlC.Close(), fdC.Close()
	if err != nil {
		_, _ = ctlP.Close(), fdP.Close()
		return nil, fmt.Errorf("ucx: starting the UCX process: %w", err)
	}
	ctl, err := net.FileConn(ctlP)
	_ = ctlP.Close()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	fc, err := net.FileConn(fdP)
	_ = fdP.Close()
	if err != nil {
		_ = ctl.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	p := &isolated{env: env, cmd: cmd, ctl: ctl, fds: fc.(*net.UnixConn), enc: gob.NewEncoder(ctl),
		calls: map[uint64]chan wmsg{}, posts: map[uint64]*post{}, regions: map[nixl.RegionID]span{},
		files: map[*os.File]uint32{}, gone: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	dec := gob.NewDecoder(ctl)
	var hello wmsg
	_ = ctl.SetReadDeadline(time.Now().Add(helloTimeout))
	err = dec.Decode(&hello)
	_ = ctl.SetReadDeadline(time.Time{})
	switch {
	case err != nil:
		err = fmt.Errorf("ucx: the UCX process did not start: %w", err)
	case hello.Op != opHello:
		err = fmt.Errorf("ucx: the UCX process sent %d before its address", hello.Op)
	default:
		err = hello.err()
	}
	if err != nil {
		_ = ctl.Close()
		_ = p.fds.Close()
		_ = cmd.Process.Kill()
		<-p.exited
		return nil, err
	}
	p.addr = hello.Data
	go p.read(dec)
	return p, nil
}

func socketPair(typ int) (parent, child *os.File, err error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, typ|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("ucx: socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "ucx-parent"), os.NewFile(uintptr(fds[1]), "ucx-child"), nil
}

// read receives the UCX process's replies, completions and notifications
// until it is gone.
func (p *isolated) read(dec *gob.Decoder) {
	for {
		var m wmsg
		if err := dec.Decode(&m); err != nil {
			p.fail(err)
			return
		}
		switch m.Op {
		case opReply:
			p.mu.Lock()
			ch := p.calls[m.Seq]
			delete(p.calls, m.Seq)
			p.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		case opDone:
			p.mu.Lock()
			x := p.posts[m.Seq]
			delete(p.posts, m.Seq)
			p.mu.Unlock()
			if x != nil {
				close(x.done)
				x.req.Done(m.err())
			}
		case opNotify:
			p.env.Notify(m.Peer, m.Data)
		}
	}
}

// fail ends the backend once the UCX process is gone: every call and
// transfer waiting on it fails, and unless the backend is closing the
// agent learns it has lost the backend.
func (p *isolated) fail(cause error) {
	select { // the exit status says why (a signal: an abort in UCX)
	case <-p.exited:
		if p.exitErr != nil {
			cause = p.exitErr
		}
	case <-time.After(time.Second):
	}
	p.mu.Lock()
	if p.ended {
		p.mu.Unlock()
		return
	}
	p.ended = true
	closing := p.closing
	why := errChildGone(cause)
	if closing {
		why = fmt.Errorf("ucx: %w", nixl.ErrClosed)
	}
	p.dead = why
	posts := p.posts
	p.posts = map[uint64]*post{}
	close(p.gone)
	p.mu.Unlock()
	for _, x := range posts {
		close(x.done)
		x.req.Done(why)
	}
	if !closing {
		p.env.Logger.Error("nixl ucx: the UCX process is gone; its transfers failed", "err", cause)
		if p.env.Lost != nil {
			p.env.Lost(why)
		}
	}
}

// send writes m; an error means the UCX process is gone (read notices).
func (p *isolated) send(m *wmsg) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	return p.enc.Encode(m)
}

// call sends m and waits for its reply.
func (p *isolated) call(m *wmsg) (wmsg, error) {
	ch := make(chan wmsg, 1)
	p.mu.Lock()
	if p.dead != nil {
		err := p.dead
		p.mu.Unlock()
		return wmsg{}, err
	}
	p.seq++
	m.Seq = p.seq
	p.calls[m.Seq] = ch
	gone := p.gone
	p.mu.Unlock()
	if err := p.send(m); err != nil {
		return wmsg{}, p.deadErr(err)
	}
	select {
	case r := <-ch:
		return r, r.err()
	case <-gone:
		return wmsg{}, p.deadErr(nil)
	}
}

func (p *isolated) deadErr(err error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dead != nil {
		return p.dead
	}
	return errChildGone(err)
}

// Failed implements nixl.Failer.
func (p *isolated) Failed() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return nil
	}
	return p.dead
}

// Name implements nixl.Backend.
func (p *isolated) Name() string { return Name }

// WireName implements nixl.WireNamer.
func (p *isolated) WireName() string { return WireName }

// Address implements nixl.Backend: the UCX process's worker address.
func (p *isolated) Address() []byte { return p.addr }

// RegisterMemory implements nixl.Backend. mem must lie in a shared arena
// (arena.MapShared), whose file the UCX process maps on first use and
// keeps mapped until it exits: a worker's KV arena lives as long as it.
func (p *isolated) RegisterMemory(id nixl.RegionID, mem []byte) ([]byte, error) {
	f, off, ok := arena.SharedFile(mem)
	if !ok {
		return nil, errors.New("ucx: a UCX process can only reach memory of a shared arena (arena.MapShared)")
	}
	fid, err := p.share(f)
	if err != nil {
		return nil, err
	}
	r, err := p.call(&wmsg{Op: opRegister, Region: id, File: fid, Off: uint64(off), Len: uint64(len(mem))})
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.regions[id] = span{base: uintptr(unsafe.Pointer(unsafe.SliceData(mem))), len: len(mem)}
	p.mu.Unlock()
	return r.Data, nil
}

// share passes f to the UCX process unless it has it, and returns its id
// there. The file and its opFile go under one lock, so that the process
// meets them in order, and before any opRegister that names the file.
func (p *isolated) share(f *os.File) (uint32, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.mu.Lock()
	fid, ok := p.files[f]
	if !ok {
		p.fileSeq++
		fid = p.fileSeq
	}
	p.mu.Unlock()
	if ok {
		return fid, nil
	}
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("ucx: memory file: %w", err)
	}
	if _, _, err := p.fds.WriteMsgUnix([]byte{0}, syscall.UnixRights(int(f.Fd())), nil); err != nil {
		return 0, p.deadErr(err)
	}
	if err := p.enc.Encode(&wmsg{Op: opFile, File: fid, Len: uint64(st.Size())}); err != nil {
		return 0, p.deadErr(err)
	}
	p.mu.Lock()
	p.files[f] = fid
	p.mu.Unlock()
	return fid, nil
}

// DeregisterMemory implements nixl.Backend.
func (p *isolated) DeregisterMemory(id nixl.RegionID) error {
	p.mu.Lock()
	_, ok := p.regions[id]
	delete(p.regions, id)
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("ucx: %w: %d", nixl.ErrUnknownRegion, id)
	}
	_, err := p.call(&wmsg{Op: opDeregister, Region: id})
	if errors.Is(err, nixl.ErrPeerGone) { // no process: nothing registered there
		return nil
	}
	return err
}

// Connect implements nixl.Backend.
func (p *isolated) Connect(peer nixl.PeerInfo) (nixl.Conn, error) {
	if len(peer.Address) == 0 {
		return nil, fmt.Errorf("ucx: empty worker address for %s", peer.Name)
	}
	p.mu.Lock()
	p.seq++
	id := p.seq
	p.mu.Unlock()
	if _, err := p.call(&wmsg{Op: opConnect, Conn: id, Peer: peer.Name, Data: peer.Address}); err != nil {
		return nil, err
	}
	return &isoConn{p: p, id: id}, nil
}

// Close implements nixl.Backend: the UCX process closes its backend and
// exits (or is killed after closeTimeout); transfers left fail with
// ErrClosed.
func (p *isolated) Close() error {
	p.mu.Lock()
	if p.closing {
		p.mu.Unlock()
		<-p.exited
		return nil
	}
	p.closing = true
	p.mu.Unlock()
	_ = p.send(&wmsg{Op: opClose})
	select {
	case <-p.exited:
	case <-time.After(closeTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	_ = p.ctl.Close()
	_ = p.fds.Close()
	p.fail(nixl.ErrClosed)
	return nil
}

// isoConn is a connection the UCX process holds.
type isoConn struct {
	p  *isolated
	id uint64
}

// Post implements nixl.Conn.
func (c *isoConn) Post(req *nixl.Request) {
	p := c.p
	m := &wmsg{Op: opPost, Conn: c.id, XOp: req.Op, Notif: req.Notif, HasNtf: req.Notif != nil, Pairs: make([]wpair, len(req.Pairs))}
	p.mu.Lock()
	for i, pr := range req.Pairs {
		s, ok := p.regions[pr.LocalRegion]
		a := uintptr(unsafe.Pointer(unsafe.SliceData(pr.Local)))
		if !ok || a < s.base || a+uintptr(len(pr.Local)) > s.base+uintptr(s.len) {
			p.mu.Unlock()
			req.Done(fmt.Errorf("ucx: %w: local buffer %d is not in its region %d", nixl.ErrUnknownRegion, i, pr.LocalRegion))
			return
		}
		m.Pairs[i] = wpair{Region: pr.LocalRegion, Off: uint64(a - s.base), Len: uint64(len(pr.Local)), Remote: pr.Remote}
	}
	if p.dead != nil {
		err := p.dead
		p.mu.Unlock()
		req.Done(err)
		return
	}
	p.seq++
	m.Seq = p.seq
	x := &post{req: req, done: make(chan struct{})}
	p.posts[m.Seq] = x
	p.mu.Unlock()
	if req.Canceled != nil {
		go func() {
			select {
			case <-req.Canceled:
				_ = p.send(&wmsg{Op: opCancel, Seq: m.Seq})
			case <-x.done:
			}
		}()
	}
	_ = p.send(m) // on error the process is gone, and fail ends the post
}

// Close implements nixl.Conn.
func (c *isoConn) Close() error {
	_ = c.p.send(&wmsg{Op: opCloseConn, Conn: c.id})
	return nil
}
