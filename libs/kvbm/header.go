package kvbm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// A block that leaves host memory (a disk slot, an object) is a header and
// its data. The header says which block it is and carries two CRC-32C
// checksums, of the data and of itself, so a torn write, a stale slot or a
// flipped bit is caught before the block is served:
//
//	offset  size  field
//	0       4     magic "SYKV"
//	4       2     format version (1)
//	6       2     reserved, 0
//	8       8     block hash
//	16      8     parent hash
//	24      4     data length in bytes
//	28      4     data CRC-32C
//	32      4     token count n
//	36      4n    tokens
//	36+4n   4     header CRC-32C of bytes [0, 36+4n)
//
// Integers are little-endian.
const (
	headerMagic   = "SYKV"
	headerVersion = 1
	headerFixed   = 36
	// MaxHeaderTokens bounds a header's tokens (a block of up to 4,096
	// tokens), so a corrupt count cannot ask for gigabytes.
	MaxHeaderTokens = 4096
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errHeader is wrapped by every header decoding failure.
var errHeader = errors.New("kvbm: bad block header")

// HeaderLen is the encoded length of a header with n tokens.
func HeaderLen(n int) int { return headerFixed + 4*n + 4 }

// checksum is the CRC-32C of data.
func checksum(data []byte) uint32 { return crc32.Checksum(data, castagnoli) }

// appendHeader appends the header of block m, whose data has length n and
// checksum sum, to dst.
func appendHeader(dst []byte, m Meta, n int, sum uint32) []byte {
	start := len(dst)
	dst = append(dst, headerMagic...)
	dst = binary.LittleEndian.AppendUint16(dst, headerVersion)
	dst = binary.LittleEndian.AppendUint16(dst, 0)
	dst = binary.LittleEndian.AppendUint64(dst, m.Hash)
	dst = binary.LittleEndian.AppendUint64(dst, m.Parent)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	dst = binary.LittleEndian.AppendUint32(dst, sum)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(m.Tokens)))
	for _, t := range m.Tokens {
		dst = binary.LittleEndian.AppendUint32(dst, t)
	}
	return binary.LittleEndian.AppendUint32(dst, checksum(dst[start:]))
}

// header is a decoded block header.
type header struct {
	meta    Meta
	dataLen int
	dataSum uint32
	size    int // encoded length
}

// decodeHeader parses and checks the header at the start of b.
func decodeHeader(b []byte) (header, error) {
	if len(b) < headerFixed+4 {
		return header{}, fmt.Errorf("%w: %d bytes, want at least %d", errHeader, len(b), headerFixed+4)
	}
	if string(b[:4]) != headerMagic {
		return header{}, fmt.Errorf("%w: magic %q", errHeader, b[:4])
	}
	if v := binary.LittleEndian.Uint16(b[4:]); v != headerVersion {
		return header{}, fmt.Errorf("%w: version %d, want %d", errHeader, v, headerVersion)
	}
	n := binary.LittleEndian.Uint32(b[32:])
	if n > MaxHeaderTokens {
		return header{}, fmt.Errorf("%w: %d tokens, at most %d", errHeader, n, MaxHeaderTokens)
	}
	size := HeaderLen(int(n))
	if len(b) < size {
		return header{}, fmt.Errorf("%w: %d bytes for %d tokens, want %d", errHeader, len(b), n, size)
	}
	if got, want := binary.LittleEndian.Uint32(b[size-4:]), checksum(b[:size-4]); got != want {
		return header{}, fmt.Errorf("%w: header checksum %#08x, computed %#08x", errHeader, got, want)
	}
	h := header{
		meta:    Meta{Hash: binary.LittleEndian.Uint64(b[8:]), Parent: binary.LittleEndian.Uint64(b[16:])},
		dataLen: int(binary.LittleEndian.Uint32(b[24:])),
		dataSum: binary.LittleEndian.Uint32(b[28:]),
		size:    size,
	}
	if n > 0 {
		h.meta.Tokens = make([]uint32, n)
		for i := range h.meta.Tokens {
			h.meta.Tokens[i] = binary.LittleEndian.Uint32(b[headerFixed+4*i:])
		}
	}
	return h, nil
}

// EncodeBlock returns block m's header followed by data: the form a block
// takes outside host memory (an object's body).
func EncodeBlock(m Meta, data []byte) []byte {
	out := AppendHeader(make([]byte, 0, HeaderLen(len(m.Tokens))+len(data)), m, data)
	return append(out, data...)
}

// AppendHeader appends the header of block m with data to dst: the
// encoding is it followed by data, for a writer that sends the two
// without copying the data behind the header.
func AppendHeader(dst []byte, m Meta, data []byte) []byte {
	return appendHeader(dst, m, len(data), checksum(data))
}

// DecodeBlock checks an encoded block and returns its meta and data (a
// sub-slice of b). It fails with ErrCorrupt when the data does not match
// its checksum or length.
func DecodeBlock(b []byte) (Meta, []byte, error) {
	h, err := decodeHeader(b)
	if err != nil {
		return Meta{}, nil, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	m, err := CheckBlock(b[:h.size], b[h.size:])
	return m, b[h.size:], err
}

// CheckBlock checks a block whose header and data were read into separate
// buffers (a transfer that scatters an object's header into one and its
// data straight into its destination) and returns its meta. hdr must be
// the header exactly. It fails with ErrCorrupt as DecodeBlock does.
func CheckBlock(hdr, data []byte) (Meta, error) {
	h, err := decodeHeader(hdr)
	switch {
	case err != nil:
		return Meta{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	case h.size != len(hdr):
		return Meta{}, fmt.Errorf("%w: a header of %d bytes in %d", ErrCorrupt, h.size, len(hdr))
	case len(data) != h.dataLen:
		return Meta{}, fmt.Errorf("%w: %d data bytes, header says %d", ErrCorrupt, len(data), h.dataLen)
	}
	if sum := checksum(data); sum != h.dataSum {
		return Meta{}, fmt.Errorf("%w: data checksum %#08x, header says %#08x", ErrCorrupt, sum, h.dataSum)
	}
	return h.meta, nil
}
