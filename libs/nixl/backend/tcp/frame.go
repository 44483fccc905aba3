package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Frame layout: a fixed 32-byte big-endian header, then Len payload bytes
// for every op except a READ request (whose Len is the amount requested)
// and a failed response.
//
//	0  magic  u8  'N'
//	1  op     u8
//	2  status u16 (responses only)
//	4  region u32
//	8  id     u64 request id, echoed in the response
//	16 offset u64
//	24 len    u64
const headerLen = 32

const magic = 'N'

type op uint8

const (
	opHello op = iota + 1 // payload: the initiator's agent name
	opWrite               // payload: bytes to store at region+offset
	opRead                // no payload; len bytes requested
	opNotif               // payload: notification message
	opResp                // status; payload for a successful read
)

// Response statuses.
const (
	statusOK uint16 = iota
	statusUnknownRegion
	statusOutOfRange
	statusBadRequest
)

// Limits on what a peer may send; anything larger is a protocol error and
// the connection is dropped.
const (
	maxChunk    = 64 << 20
	maxNotif    = 1 << 20
	maxHelloLen = 255
)

var errFrame = errors.New("tcp: malformed frame")

type header struct {
	op     op
	status uint16
	region uint32
	id     uint64
	offset uint64
	len    uint64
}

func (h *header) put(b []byte) {
	_ = b[headerLen-1]
	b[0] = magic
	b[1] = byte(h.op)
	binary.BigEndian.PutUint16(b[2:], h.status)
	binary.BigEndian.PutUint32(b[4:], h.region)
	binary.BigEndian.PutUint64(b[8:], h.id)
	binary.BigEndian.PutUint64(b[16:], h.offset)
	binary.BigEndian.PutUint64(b[24:], h.len)
}

// decodeHeader parses and bounds-checks a header from an untrusted peer.
func decodeHeader(b []byte) (header, error) {
	if len(b) < headerLen {
		return header{}, fmt.Errorf("%w: %d header bytes", errFrame, len(b))
	}
	if b[0] != magic {
		return header{}, fmt.Errorf("%w: magic %#x", errFrame, b[0])
	}
	h := header{
		op:     op(b[1]),
		status: binary.BigEndian.Uint16(b[2:]),
		region: binary.BigEndian.Uint32(b[4:]),
		id:     binary.BigEndian.Uint64(b[8:]),
		offset: binary.BigEndian.Uint64(b[16:]),
		len:    binary.BigEndian.Uint64(b[24:]),
	}
	limit := uint64(maxChunk)
	switch h.op {
	case opHello:
		limit = maxHelloLen
	case opNotif:
		limit = maxNotif
	case opWrite, opRead:
	case opResp:
		if h.status > statusBadRequest {
			return header{}, fmt.Errorf("%w: status %d", errFrame, h.status)
		}
	default:
		return header{}, fmt.Errorf("%w: op %d", errFrame, h.op)
	}
	if h.op != opResp && h.status != 0 {
		return header{}, fmt.Errorf("%w: status on a request", errFrame)
	}
	if h.len > limit {
		return header{}, fmt.Errorf("%w: op %d length %d > %d", errFrame, h.op, h.len, limit)
	}
	return h, nil
}
