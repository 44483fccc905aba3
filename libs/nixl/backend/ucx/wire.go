//go:build ucx && cgo

package ucx

import (
	"errors"
	"fmt"

	"switchyard.dev/libs/nixl"
)

// The messages between a backend and its UCX process (Config.Isolate),
// gob-encoded on a stream socket; a memory file travels beside its
// opFile on a datagram socket, as SCM_RIGHTS.
const (
	opHello      = iota + 1 // child: Data = the UCP worker address, or Err
	opFile                  // File, Len: the memory file that follows
	opRegister              // Seq, Region, File, Off, Len → opReply (Data = key)
	opDeregister            // Seq, Region → opReply
	opConnect               // Seq, Conn, Peer, Data = address → opReply
	opCloseConn             // Conn
	opPost                  // Seq = the transfer, Conn, XOp, Notif, Pairs
	opCancel                // Seq
	opReply                 // child: Seq, Data, Err
	opDone                  // child: Seq, Err
	opNotify                // child: Peer = from, Data
	opClose                 // close the backend and exit
)

// wmsg is one message; gob leaves out the fields a message does not use.
type wmsg struct {
	Op      uint8
	Seq     uint64
	Conn    uint64
	Region  nixl.RegionID
	File    uint32
	Off     uint64
	Len     uint64
	Peer    string
	Data    []byte
	XOp     nixl.Op
	Notif   []byte
	HasNtf  bool // Notif is set, also when empty
	Pairs   []wpair
	ErrKind uint8
	Err     string
}

// wpair is a nixl.Pair with its local buffer as a range of its region.
type wpair struct {
	Region nixl.RegionID
	Off    uint64
	Len    uint64
	Remote nixl.RemoteDesc
}

// kinds are the errors a message names by index+1, so that errors.Is
// holds on both sides of the process boundary.
var kinds = []error{nixl.ErrPeerGone, nixl.ErrRemote, nixl.ErrCanceled, nixl.ErrClosed,
	nixl.ErrUnknownRegion, nixl.ErrOutOfRange, nixl.ErrLenMismatch, nixl.ErrNoBackend, nixl.ErrUnknownPeer}

func (m *wmsg) setErr(err error) {
	if err == nil {
		return
	}
	m.Err = err.Error()
	for i, k := range kinds {
		if errors.Is(err, k) {
			m.ErrKind = uint8(i + 1)
			return
		}
	}
}

func (m *wmsg) err() error {
	switch {
	case m.Err == "" && m.ErrKind == 0:
		return nil
	case m.ErrKind > 0 && int(m.ErrKind) <= len(kinds):
		return &childError{msg: m.Err, kind: kinds[m.ErrKind-1]}
	}
	return errors.New(m.Err)
}

// childError is an error from the UCX process: its text, and the nixl
// error it wraps there.
type childError struct {
	msg  string
	kind error
}

func (e *childError) Error() string { return e.msg }
func (e *childError) Unwrap() error { return e.kind }

// errChildGone wraps why the UCX process is gone.
func errChildGone(why error) error {
	return fmt.Errorf("ucx: %w: the UCX process is gone: %w", nixl.ErrPeerGone, why)
}
