//go:build ucx && cgo

package ucx

/*
#cgo pkg-config: ucx
#include "nx.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// worker owns one UCP context and worker. Every UCX call happens on its
// loop goroutine; other goroutines submit closures with do or call.
type worker struct {
	ctx    C.ucp_context_h
	w      C.ucp_worker_h
	efd    C.int
	wakeR  int
	wakeW  int
	idleMs C.int
	spin   time.Duration

	mu      sync.Mutex
	cmds    []func()
	stopped bool // written under mu by the loop goroutine, which may read it without
	// sleeping: the loop is (about to be) in nx_wait, so do must write
	// to the wake pipe; otherwise the loop finds the command on its own.
	sleeping bool
	done     chan struct{}

	// Owned by the loop goroutine.
	active      []pending
	reqs        []C.uintptr_t // reap's buffers for nx_check_all
	sts         []C.ucs_status_t
	finished    []finished // reap's buffer of completions to run
	quit        bool
	poll        func() bool // progress; receive notifications and WRITE messages
	failures    int32       // nx_failures when checkFailed last ran
	checkFailed func()
	destroy     func()
	unmap       func() // after the drain, before the UCX worker is destroyed
	release     func() // after the UCX worker is destroyed: free C memory
}

// pending is an outstanding request and what to do when it finishes.
type pending struct {
	req  request
	done func(status)
}

// defaultRxSeg is UCX 1.13's tcp receive segment (UCX_TCP_RX_SEG_SIZE);
// eagerSlack is room beside an eager message's data for its headers (UCX's
// and a WRITE's index 0, with the reply address and a notification).
const (
	defaultRxSeg = 64 << 10
	eagerSlack   = 4 << 10
)

func newWorker(cfg Config) (*worker, error) {
	w := &worker{done: make(chan struct{}), efd: -1}
	w.idleMs = C.int(max(cfg.IdleWait, time.Millisecond) / time.Millisecond)
	w.spin = cfg.SpinWait
	if w.spin == 0 {
		w.spin = defaultSpinWait
	}
	var rxSeg *C.char
	if seg := cfg.eagerMax() + eagerSlack; seg > defaultRxSeg {
		rxSeg = C.CString(fmt.Sprintf("%dk", (seg+1023)/1024))
		defer C.free(unsafe.Pointer(rxSeg))
	}
	if st := status(C.nx_init(1, rxSeg, &w.ctx, &w.w)); st != statusOK {
		return nil, fmt.Errorf("ucx: init: %w", st.err())
	}
	if st := status(C.ucp_worker_get_efd(w.w, &w.efd)); st != statusOK {
		w.efd = -1 // fall back to timed sleeps
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		C.ucp_worker_destroy(w.w)
		C.ucp_cleanup(w.ctx)
		return nil, fmt.Errorf("ucx: wake pipe: %w", err)
	}
	w.wakeR, w.wakeW = p[0], p[1]
	return w, nil // the owner sets the hooks, then calls start
}

// do queues f for the loop; it reports false once the worker has stopped.
func (w *worker) do(f func()) bool {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return false
	}
	w.cmds = append(w.cmds, f)
	sleeping := w.sleeping
	w.mu.Unlock()
	if sleeping { // a running loop picks the command up without a syscall
		_, _ = syscall.Write(w.wakeW, []byte{1})
	}
	return true
}

// call runs f on the loop and waits for it.
func (w *worker) call(f func()) bool {
	ran := make(chan struct{})
	if !w.do(func() { f(); close(ran) }) {
		return false
	}
	select {
	case <-ran:
		return true
	case <-w.done:
		return false
	}
}

// watch tracks a request returned by a UCX call: finished ones complete at
// once, in-progress ones when the loop sees them finish.
func (w *worker) watch(r request, st status, done func(status)) {
	if st != statusInProgress {
		done(st)
		return
	}
	w.active = append(w.active, pending{req: r, done: done})
}

// start runs the loop goroutine; the hooks must be set before.
func (w *worker) start() { go w.loop() }

func (w *worker) loop() {
	defer close(w.done)
	var lastBusy time.Time
	for {
		w.mu.Lock()
		cmds := w.cmds
		w.cmds = nil
		w.mu.Unlock()
		for _, f := range cmds {
			f()
		}
		if w.quit {
			w.shutdown()
			return
		}
		busy := len(cmds) > 0
		busy = w.poll() || busy
		busy = w.reap() || busy
		if f := atomic.LoadInt32((*int32)(unsafe.Pointer(&C.nx_failures))); f != w.failures { // an endpoint failed
			w.failures = f
			w.checkFailed()
		}
		// While polling without progress, yield: the goroutines waiting
		// on our completions (and, in one process, the peer agent's loop)
		// need a P. After SpinWait without progress, sleep on the event
		// fd, also with requests outstanding (their progress raises
		// events too): polling through a long transfer took a core from
		// the engine computing beside it (a 2,048-token remote prefill
		// ran 60% longer). The 1 ms timeout bounds a missed event.
		switch {
		case busy:
			lastBusy = time.Time{}
		case w.spin > 0 && lastBusy.IsZero():
			lastBusy = time.Now()
			runtime.Gosched()
		case w.spin > 0 && time.Since(lastBusy) < w.spin:
			runtime.Gosched()
		default:
			lastBusy = time.Time{}
			timeout := w.idleMs
			if len(w.active) > 0 {
				timeout = 1
			}
			w.mu.Lock()
			if len(w.cmds) > 0 { // arrived since the drain above: no sleep
				w.mu.Unlock()
				continue
			}
			w.sleeping = true
			w.mu.Unlock()
			C.nx_wait(w.w, w.efd, C.int(w.wakeR), timeout)
			w.mu.Lock()
			w.sleeping = false
			w.mu.Unlock()
		}
	}
}

// reap completes finished requests; it reports whether any did.
func (w *worker) reap() bool {
	n := len(w.active)
	if n == 0 {
		return false
	}
	w.reqs, w.sts = w.reqs[:0], slices.Grow(w.sts[:0], n)[:n]
	for _, p := range w.active {
		w.reqs = append(w.reqs, C.uintptr_t(uintptr(p.req)))
	}
	if C.nx_check_all(&w.reqs[0], C.int(n), &w.sts[0]) == 0 {
		return false
	}
	done := w.finished[:0]
	keep := w.active[:0]
	for i, p := range w.active {
		if st := status(w.sts[i]); st != statusInProgress {
			done = append(done, finished{p.done, st})
			continue
		}
		keep = append(keep, p)
	}
	clear(w.active[len(keep):])
	w.active = keep
	// Completions may post more work, so run them once active is
	// consistent. They never reap, so the buffer is not reused under them.
	for _, f := range done {
		f.done(f.st)
	}
	clear(done) // drop the closures until the next reap
	w.finished = done[:0]
	return true
}

// finished is a request that reap saw end, with its status.
type finished struct {
	done func(status)
	st   status
}

// shutdown runs the commands queued before it (do accepted them, so their
// owners wait for them: a Post racing Close must still complete), then
// destroy, drains what those started, unmaps memory once no request can
// use it, and frees the worker.
func (w *worker) shutdown() {
	w.mu.Lock()
	w.stopped = true // do refuses from here on
	cmds := w.cmds
	w.cmds = nil
	w.mu.Unlock()
	for _, f := range cmds {
		f()
	}
	if w.destroy != nil {
		w.destroy()
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(w.active) > 0 && time.Now().Before(deadline) {
		C.ucp_worker_progress(w.w)
		w.reap()
	}
	for _, p := range w.active { // UCX never finished these; report, leak
		p.done(status(C.UCS_ERR_TIMED_OUT))
	}
	w.active = nil
	if w.unmap != nil {
		w.unmap()
	}
	C.ucp_worker_destroy(w.w)
	C.ucp_cleanup(w.ctx)
	if w.release != nil {
		w.release()
	}
	_ = syscall.Close(w.wakeR)
	_ = syscall.Close(w.wakeW)
}

// stop asks the loop to shut down and waits for it.
func (w *worker) stop() {
	if w.do(func() { w.quit = true }) {
		<-w.done
	}
}
