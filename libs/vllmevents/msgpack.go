package vllmevents

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrMalformed is wrapped by every error about undecodable input.
var ErrMalformed = errors.New("vllmevents: malformed payload")

// maxDepth bounds nesting while skipping unknown values, so hostile input
// cannot exhaust the stack.
const maxDepth = 32

// reader is a minimal MessagePack reader over a byte slice: only what the
// KV event schema needs, no reflection, no allocation. Every method checks
// bounds and reports malformed input as an error.
type reader struct {
	b   []byte
	off int
}

func (r *reader) fail(what string) error {
	return fmt.Errorf("%w: %s at offset %d", ErrMalformed, what, r.off)
}

func (r *reader) done() bool { return r.off >= len(r.b) }

// peek returns the next type byte without consuming it.
func (r *reader) peek() (byte, error) {
	if r.off >= len(r.b) {
		return 0, r.fail("unexpected end")
	}
	return r.b[r.off], nil
}

// take consumes n bytes.
func (r *reader) take(n int) ([]byte, error) {
	if n < 0 || n > len(r.b)-r.off {
		return nil, r.fail("truncated")
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p, nil
}

// uintN reads an n-byte big-endian unsigned integer (n = 1, 2, 4 or 8).
func (r *reader) uintN(n int) (uint64, error) {
	p, err := r.take(n)
	if err != nil {
		return 0, err
	}
	switch n {
	case 1:
		return uint64(p[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(p)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(p)), nil
	}
	return binary.BigEndian.Uint64(p), nil
}

// nil consumes a nil and reports whether there was one.
func (r *reader) nil() bool {
	if r.off < len(r.b) && r.b[r.off] == 0xc0 {
		r.off++
		return true
	}
	return false
}

// container reads an array or map header. For a map it returns the number
// of entries and isMap. The count is checked against the remaining bytes
// (every element takes at least one), so callers may size buffers by it.
func (r *reader) container() (n int, isMap bool, err error) {
	c, err := r.peek()
	if err != nil {
		return 0, false, err
	}
	r.off++
	var v uint64
	switch {
	case c >= 0x90 && c <= 0x9f:
		v = uint64(c & 0x0f)
	case c >= 0x80 && c <= 0x8f:
		v, isMap = uint64(c&0x0f), true
	case c == 0xdc, c == 0xde:
		v, err = r.uintN(2)
		isMap = c == 0xde
	case c == 0xdd, c == 0xdf:
		v, err = r.uintN(4)
		isMap = c == 0xdf
	default:
		r.off--
		return 0, false, r.fail(fmt.Sprintf("want array or map, got type %#02x", c))
	}
	if err != nil {
		return 0, false, err
	}
	per := uint64(1)
	if isMap {
		per = 2
	}
	if v > uint64(len(r.b)-r.off)/per {
		return 0, false, r.fail("container longer than input")
	}
	return int(v), isMap, nil
}

// array reads an array header.
func (r *reader) array() (int, error) {
	n, isMap, err := r.container()
	if err == nil && isMap {
		return 0, r.fail("want array, got map")
	}
	return n, err
}

// int reads any MessagePack integer as its 64-bit two's complement bit
// pattern, with signed reporting whether it was encoded as negative.
func (r *reader) int() (v uint64, negative bool, err error) {
	c, err := r.peek()
	if err != nil {
		return 0, false, err
	}
	r.off++
	switch {
	case c <= 0x7f:
		return uint64(c), false, nil
	case c >= 0xe0:
		return uint64(int64(int8(c))), true, nil
	case c >= 0xcc && c <= 0xcf: // uint 8/16/32/64
		v, err = r.uintN(1 << (c - 0xcc))
		return v, false, err
	case c >= 0xd0 && c <= 0xd3: // int 8/16/32/64
		n := 1 << (c - 0xd0)
		if v, err = r.uintN(n); err != nil {
			return 0, false, err
		}
		shift := 64 - 8*n
		s := int64(v<<shift) >> shift // sign-extend
		return uint64(s), s < 0, nil
	}
	r.off--
	return 0, false, r.fail(fmt.Sprintf("want integer, got type %#02x", c))
}

// float reads a float (32 or 64 bit) or an integer as a float64.
func (r *reader) float() (float64, error) {
	c, err := r.peek()
	if err != nil {
		return 0, err
	}
	switch c {
	case 0xca:
		r.off++
		v, err := r.uintN(4)
		return float64(math.Float32frombits(uint32(v))), err
	case 0xcb:
		r.off++
		v, err := r.uintN(8)
		return math.Float64frombits(v), err
	}
	v, neg, err := r.int()
	if neg {
		return float64(int64(v)), err
	}
	return float64(v), err
}

// bytes reads a str or bin value, returning a view into the input.
func (r *reader) bytes() ([]byte, error) {
	c, err := r.peek()
	if err != nil {
		return nil, err
	}
	r.off++
	var n uint64
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xc4:
		n, err = r.uintN(1)
	case c == 0xda || c == 0xc5:
		n, err = r.uintN(2)
	case c == 0xdb || c == 0xc6:
		n, err = r.uintN(4)
	default:
		r.off--
		return nil, r.fail(fmt.Sprintf("want str or bin, got type %#02x", c))
	}
	if err != nil {
		return nil, err
	}
	if n > uint64(len(r.b)-r.off) {
		return nil, r.fail("string longer than input")
	}
	return r.take(int(n))
}

// skip consumes one value of any type.
func (r *reader) skip(depth int) error {
	if depth > maxDepth {
		return r.fail("nested too deeply")
	}
	c, err := r.peek()
	if err != nil {
		return err
	}
	switch {
	case c <= 0x7f, c >= 0xe0, c == 0xc0, c == 0xc2, c == 0xc3:
		r.off++
		return nil
	case c >= 0xcc && c <= 0xd3:
		_, _, err = r.int()
		return err
	case c == 0xca || c == 0xcb:
		_, err = r.float()
		return err
	case c >= 0xa0 && c <= 0xbf, c == 0xd9, c == 0xda, c == 0xdb, c == 0xc4, c == 0xc5, c == 0xc6:
		_, err = r.bytes()
		return err
	case c >= 0xd4 && c <= 0xd8: // fixext 1/2/4/8/16
		r.off++
		_, err = r.take(1 + 1<<(c-0xd4))
		return err
	case c >= 0xc7 && c <= 0xc9: // ext 8/16/32
		r.off++
		n, err := r.uintN(1 << (c - 0xc7))
		if err != nil {
			return err
		}
		if n > uint64(len(r.b)-r.off) {
			return r.fail("ext longer than input")
		}
		_, err = r.take(1 + int(n))
		return err
	}
	n, isMap, err := r.container()
	if err != nil {
		return err
	}
	if isMap {
		n *= 2
	}
	for range n {
		if err := r.skip(depth + 1); err != nil {
			return err
		}
	}
	return nil
}
