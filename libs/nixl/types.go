package nixl

import (
	"errors"
	"fmt"
)

// RegionID names a registered region within one agent.
type RegionID uint32

// Op is the direction of a transfer, seen from the initiator.
type Op uint8

const (
	// Read copies remote memory into local memory.
	Read Op = 1
	// Write copies local memory into remote memory.
	Write Op = 2
)

func (o Op) String() string {
	switch o {
	case Read:
		return "READ"
	case Write:
		return "WRITE"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Desc is one contiguous range of a region.
type Desc struct {
	Region RegionID
	Offset uint64
	Len    uint64
}

// XferRequest describes one transfer. Local[i] pairs with Remote[i]; the
// two lists must have the same length and each pair the same Len.
type XferRequest struct {
	Op Op
	// Peer is the remote agent's name, loaded with LoadRemoteMetadata, or
	// the agent's own name for a transfer between its memory (Local) and
	// its storage regions (Remote): Read loads storage into memory, Write
	// stores memory.
	Peer   string
	Local  []Desc
	Remote []Desc
	// Notif, when non-nil, is delivered to the peer once the transfer has
	// completed successfully (storage transfers take none).
	Notif []byte
}

// MaxNotif bounds a notification message; every backend carries at least
// this much.
const MaxNotif = 64 << 10

// Notif is a notification received from a peer.
type Notif struct {
	From string
	Msg  []byte
}

// Errors reported at Post time or on a handle. Backends wrap them so
// errors.Is works across the stack.
var (
	ErrUnknownPeer   = errors.New("nixl: unknown peer")
	ErrUnknownRegion = errors.New("nixl: unknown region")
	ErrOutOfRange    = errors.New("nixl: descriptor out of range")
	ErrLenMismatch   = errors.New("nixl: descriptor length mismatch")
	ErrPeerGone      = errors.New("nixl: peer gone")
	ErrCanceled      = errors.New("nixl: transfer canceled")
	ErrClosed        = errors.New("nixl: agent closed")
	ErrNoBackend     = errors.New("nixl: no common backend")
	ErrRemote        = errors.New("nixl: remote rejected request")
)

// inRange reports whether [off, off+n) lies within a region of size size,
// without overflowing.
func inRange(off, n, size uint64) bool {
	return off <= size && n <= size-off
}
