// Package ucx is the nixl backend over UCX's UCP API (cgo, libucx). WRITE
// is a tagged transfer by default: a header, then one ucp_tag_send_nbx per
// descriptor from registered memory; the target checks the descriptors
// against its registrations, posts ucp_tag_recv_nbx into them (rendezvous,
// zero-copy: cma on shared memory), delivers the notification and acks
// (write.go). READ, and WRITE with Config.OneSidedWrite, are one-sided
// ucp_get_nbx/ucp_put_nbx into peers' registered memory, completed by an
// endpoint flush, with the notification as a tagged message.
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
// computing beside it, yet it still serves tagged WRITEs and emulated
// RMA.
//
// Trust model: the initiator validates descriptors against the target's
// published metadata; a tagged WRITE is also checked by the target (errors
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

// Name is the backend's identifier in metadata.
const Name = "ucx"

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
	// is, instead of the default tagged WRITE (tag rendezvous into memory
	// the target receives into; see write.go). Put is the better choice
	// only where UCX has a hardware RMA lane (RDMA NICs); UCX 1.13 emulates
	// put over tcp and shared memory with active-message fragments.
	OneSidedWrite bool
}
