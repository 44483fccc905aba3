package ucx

import (
	"encoding/binary"
	"errors"

	"switchyard.dev/libs/nixl"
)

// The header of one message of a WRITE (write.go): each descriptor pair
// travels as one UCX active message whose header says where its data goes
// and whose data is the pair's bytes, so the target learns the
// destination from the rendezvous request itself and receives straight
// into it. Little endian:
//
//	u64 key: the initiating connection's id | the WRITE's sequence number
//	    (the target's ack carries it back in its tag)
//	u32 index of this pair in the WRITE
//	u32 count of pairs in the WRITE (0: a notification-only WRITE, whose
//	    one message has index 0 and no data)
//	u32 target region, u64 offset (the data's length is the message's)
//	index 0 only, the WRITE's own fields:
//	  u32 len, reply address (the initiator's UCX worker address)
//	  u8 len, initiator name (nixl names are at most 255 bytes)
//	  u8 has notification (0 or 1)
//	  u32 len, notification
//
// It arrives from the network, so parseHeader checks every length and
// accepts only what appendHeader writes. This file is plain Go, so the
// format is tested and fuzzed without libucx.

// header is one message's header. addr, from, notif and hasNtf are the
// WRITE's and travel with index 0 only.
type header struct {
	key          uint64
	index, count uint32
	region       nixl.RegionID
	off          uint64

	addr   []byte
	from   string
	notif  []byte
	hasNtf bool
}

// pairHeaderBytes is the size of a header other than index 0's.
const pairHeaderBytes = 8 + 4 + 4 + 4 + 8

// appendHeader appends h's encoding.
func appendHeader(b []byte, h *header) []byte {
	b = binary.LittleEndian.AppendUint64(b, h.key)
	b = binary.LittleEndian.AppendUint32(b, h.index)
	b = binary.LittleEndian.AppendUint32(b, h.count)
	b = binary.LittleEndian.AppendUint32(b, uint32(h.region))
	b = binary.LittleEndian.AppendUint64(b, h.off)
	if h.index != 0 {
		return b
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h.addr)))
	b = append(b, h.addr...)
	b = append(b, byte(len(h.from)))
	b = append(b, h.from...)
	if h.hasNtf {
		b = append(b, 1)
	} else {
		b = append(b, 0)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(h.notif)))
	return append(b, h.notif...)
}

var (
	errShort   = errors.New("ucx: truncated write header")
	errLong    = errors.New("ucx: write header: trailing bytes")
	errBadFlag = errors.New("ucx: write header: notification flag is neither 0 nor 1")
	errIndex   = errors.New("ucx: write header: pair index out of range")
)

// parseHeader decodes a header; addr and notif alias b.
func parseHeader(b []byte) (h header, err error) {
	if len(b) < pairHeaderBytes {
		return h, errShort
	}
	h.key = binary.LittleEndian.Uint64(b)
	h.index = binary.LittleEndian.Uint32(b[8:])
	h.count = binary.LittleEndian.Uint32(b[12:])
	h.region = nixl.RegionID(binary.LittleEndian.Uint32(b[16:]))
	h.off = binary.LittleEndian.Uint64(b[20:])
	b = b[pairHeaderBytes:]
	if h.index >= max(h.count, 1) {
		return h, errIndex
	}
	if h.index != 0 {
		if len(b) != 0 {
			return h, errLong
		}
		return h, nil
	}
	take := func(n uint64) []byte {
		if err != nil || n > uint64(len(b)) {
			if err == nil {
				err = errShort
			}
			return nil
		}
		v := b[:n]
		b = b[n:]
		return v
	}
	u32 := func() uint32 {
		if v := take(4); v != nil {
			return binary.LittleEndian.Uint32(v)
		}
		return 0
	}
	h.addr = take(uint64(u32()))
	if nb := take(1); nb != nil {
		h.from = string(take(uint64(nb[0])))
	}
	if f := take(1); f != nil {
		switch f[0] {
		case 0, 1:
			h.hasNtf = f[0] == 1
		default:
			err = errBadFlag
		}
	}
	h.notif = take(uint64(u32()))
	if err == nil && len(b) != 0 {
		err = errLong
	}
	return h, err
}
