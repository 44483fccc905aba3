package ucx

import (
	"encoding/binary"
	"errors"

	"switchyard.dev/libs/nixl"
)

// The header of a tagged WRITE (write.go), little endian:
//
//	u32 len, reply address (the initiator's UCX worker address)
//	u32 first data sequence number
//	u32 npairs
//	u8 len, initiator name (nixl names are at most 255 bytes)
//	u8 has notification (0 or 1)
//	u32 len, notification
//	npairs × {u32 region, u64 offset, u64 length}
//
// It arrives from the network, so parseHeader checks every length and
// accepts only what appendHeaderStart and appendHeaderPair write. This
// file is plain Go, so the format is tested and fuzzed without libucx.

// appendHeaderStart appends everything before the pairs; npairs of them
// must follow (appendHeaderPair).
func appendHeaderStart(h, addr []byte, dseq uint32, npairs int, from string, notif []byte, hasNotif bool) []byte {
	h = binary.LittleEndian.AppendUint32(h, uint32(len(addr)))
	h = append(h, addr...)
	h = binary.LittleEndian.AppendUint32(h, dseq)
	h = binary.LittleEndian.AppendUint32(h, uint32(npairs))
	h = append(h, byte(len(from)))
	h = append(h, from...)
	if hasNotif {
		h = append(h, 1)
	} else {
		h = append(h, 0)
	}
	h = binary.LittleEndian.AppendUint32(h, uint32(len(notif)))
	return append(h, notif...)
}

// appendHeaderPair appends one (target region, offset, length).
func appendHeaderPair(h []byte, region nixl.RegionID, off, n uint64) []byte {
	h = binary.LittleEndian.AppendUint32(h, uint32(region))
	h = binary.LittleEndian.AppendUint64(h, off)
	return binary.LittleEndian.AppendUint64(h, n)
}

// pairBytes is the encoded size of one pair.
const pairBytes = 4 + 8 + 8

type hdrPair struct {
	region   nixl.RegionID
	off, len uint64
}

type header struct {
	addr   []byte
	dseq   uint32
	from   string
	notif  []byte
	hasNtf bool
	pairs  []hdrPair
}

var (
	errShort   = errors.New("ucx: truncated write header")
	errBadFlag = errors.New("ucx: write header: notification flag is neither 0 nor 1")
)

// parseHeader decodes a header; addr and notif alias b.
func parseHeader(b []byte) (h header, err error) {
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
	h.dseq = u32()
	n := u32()
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
	if err != nil {
		return h, err
	}
	if uint64(n)*pairBytes != uint64(len(b)) {
		return h, errShort
	}
	h.pairs = make([]hdrPair, n)
	for i := range h.pairs {
		h.pairs[i] = hdrPair{nixl.RegionID(binary.LittleEndian.Uint32(b)), binary.LittleEndian.Uint64(b[4:]), binary.LittleEndian.Uint64(b[12:])}
		b = b[pairBytes:]
	}
	return h, nil
}
