// Package ucx is the nixl backend over UCX's UCP API (cgo, libucx). WRITE
// goes as UCX active messages, one per descriptor pair, whose header names
// the pair's destination and whose data is the pair's bytes from
// registered memory; the target checks each destination against its
// registrations and receives the data straight into it (rendezvous,
// zero-copy: cma on shared memory, tcp zcopy), or copies it out of UCX's
// buffer when it came eagerly (up to Config.EagerMax over tcp), then
// delivers the notification and acks (write.go). READ, and WRITE with
// Config.OneSidedWrite, are one-sided ucp_get_nbx/ucp_put_nbx into peers'
// registered memory, completed by an endpoint flush, with the notification
// as a tagged message.
//
// The cgo code is compiled only with the build tag "ucx" and cgo enabled
// (files tagged `ucx && cgo`). Without it New returns a factory that fails
// with ErrUnavailable, so programs and tests build and run on machines
// without libucx; the agent then falls back to another backend. Build and
// test with:
//
//	go test -tags ucx ./libs/nixl/...
//
// Threading: a UCP worker is used by one goroutine at a time
// (UCS_THREAD_MODE_SERIALIZED). One goroutine owns the worker and runs
// every UCX call; other goroutines hand it closures. It is not locked to
// an OS thread: a locked goroutine that yields makes the runtime hand its P
// to another thread and back (two futex wake-ups per yield), which cost a
// 64 KiB WRITE more than UCX did. It polls ucp_worker_progress until
// SpinWait has passed without progress, yielding (runtime.Gosched)
// whenever a poll made no progress, and then sleeps on the worker's event
// fd (ucp_worker_arm), also while operations are outstanding (at most
// 1 ms then, in case an event is missed): an idle agent costs no CPU, and
// one waiting on a long transfer does not take a core from the engine
// computing beside it, yet it still serves incoming WRITEs and emulated
// RMA.
//
// Isolation: with Config.Isolate (workers' default) UCX runs in a child
// process, this program started again and taken over by this package's
// init (child.go), which maps the agent's shared arenas from their memory
// files and serves the backend over a socket pair (proc.go, wire.go).
// libucx 1.13 aborts on internal assertions when a peer fails during
// wire-up or mid-rendezvous, and an abort inside a cgo call cannot be
// recovered; in the child it ends only the child. Its transfers then fail
// with nixl.ErrPeerGone, and the backend reports itself failed
// (nixl.Failer) so that the agent falls back to its next backend.
//
// Trust model: the initiator validates descriptors against the target's
// published metadata; a WRITE is also checked by the target (errors
// come back as ErrRemote); one-sided READ and put are not (as with RDMA),
// UCX only validates rkeys. What runs here: UCX's tcp, shared-memory (posix,
// sysv, cma) and self transports. RDMA NICs and GPU memory (cuda_ipc,
// gdr_copy) are not present on this machine and are not exercised.
package ucx

import (
	"errors"
	"time"
)

// defaultSpinWait is Config.SpinWait's default.
const defaultSpinWait = 100 * time.Microsecond

// Name is the backend's identifier.
const Name = "ucx"

// WireName is the backend's name in metadata: the version of its protocol
// (nixl.WireNamer). "ucx-am" is the active-message WRITE; agents built
// with the older tagged WRITE advertise "ucx", so the two never talk over
// ucx (a tagged header to this backend, or an active message to that one,
// would be dropped and its WRITE wait out its deadline): they fall to tcp.
const WireName = "ucx-am"

// ErrUnavailable is returned by the factory when the package was built
// without the ucx tag or cgo.
var ErrUnavailable = errors.New("ucx: backend not built in (build with -tags ucx and cgo enabled)")

// Config tunes the backend; zero values take defaults.
type Config struct {
	// IdleWait is the longest the progress goroutine sleeps between checks
	// when nothing is outstanding (events wake it earlier). Default 100ms.
	IdleWait time.Duration
	// SpinWait is how long the progress goroutine keeps polling after its
	// last progress before it sleeps on the event fd (with or without
	// operations outstanding): the next message of a stream then costs no
	// wake-up. Default 100µs; negative disables.
	SpinWait time.Duration
	// NoPeerErrHandling creates endpoints without
	// UCP_ERR_HANDLING_MODE_PEER. UCX 1.13's shared-memory transports
	// (posix, sysv) cannot handle peer failure, so with the default mode a
	// peer reachable only over shm is unreachable, and with tcp also
	// enabled UCX carries messages over tcp. Set it to use shm; a peer that
	// dies mid-transfer is then not detected by UCX, so bound Wait with a
	// context and Invalidate the peer.
	NoPeerErrHandling bool
	// OneSidedWrite makes WRITE a one-sided ucp_put_nbx + flush, as READ
	// is, instead of the default active-message WRITE (into memory the
	// target receives into; see write.go). Put is the better choice
	// only where UCX has a hardware RMA lane (RDMA NICs); UCX 1.13 emulates
	// put over tcp and shared memory with active-message fragments.
	OneSidedWrite bool
	// EagerMax is the largest descriptor a WRITE over tcp sends eagerly:
	// the data follows its header at once and the target copies it out of
	// UCX's receive buffer, instead of a rendezvous round trip. Larger
	// ones, and every one over other transports, go as UCX chooses
	// (rendezvous, zero-copy, above its threshold). Default 64 KiB: there
	// eager moved 64 KiB over tcp 1.6x faster than UCX 1.13's choice,
	// rendezvous, and at 256 KiB as fast; over shared memory rendezvous
	// (cma, one copy) beat eager's fragments and copies (README.md).
	// Unless UCX_TCP_RX_SEG_SIZE is set, the backend raises UCX's tcp
	// receive segment to hold an EagerMax message with its headers.
	// Negative: never force eager; at most 1 MiB (larger values are
	// taken as 1 MiB).
	EagerMax int
	// Isolate runs UCX in a child process (this program, started again),
	// so that an abort inside UCX ends the child instead of the program:
	// UCX 1.13 aborts on internal assertions when a peer fails during
	// wire-up. The child maps the registered memory from its memory file,
	// so every region must lie in a shared arena (arena.MapShared). When
	// the child dies, its transfers fail with nixl.ErrPeerGone and the
	// backend reports itself Failed: the agent stops advertising it and
	// falls back to its next backend.
	Isolate bool
}

// defaultEagerMax is Config.EagerMax's default.
const defaultEagerMax = 64 << 10

func (c Config) eagerMax() int {
	switch {
	case c.EagerMax == 0:
		return defaultEagerMax
	case c.EagerMax < 0:
		return -1
	}
	return min(c.EagerMax, maxEagerMax)
}

// maxEagerMax caps Config.EagerMax: each eager message is held whole in a
// tcp receive segment and in one of the target's pooled buffers.
const maxEagerMax = 1 << 20
