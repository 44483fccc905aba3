package metadata

import (
	"encoding/binary"
	"fmt"
)

// Decode parses a blob produced by Encode.
func Decode(blob []byte) (*Agent, error) {
	d := decoder{b: blob}
	var m [4]byte
	copy(m[:], d.take(4))
	if d.err == nil && m != magic {
		return nil, fmt.Errorf("%w: bad magic", ErrMalformed)
	}
	v := d.u8()
	if d.err == nil && v != 1 && v != Version {
		return nil, fmt.Errorf("%w: version %d, want 1..%d", ErrMalformed, v, Version)
	}
	a := &Agent{Name: d.str8()}
	if v >= 2 {
		a.Epoch, a.Gen = d.u64(), d.u64()
	}
	nb := int(d.u8())
	if nb > MaxBackends {
		d.fail("too many backends")
	}
	for i := 0; i < nb && d.err == nil; i++ {
		a.Backends = append(a.Backends, Backend{Name: d.str8(), Address: d.bytes32(MaxAddrLen)})
	}
	nr := d.u32()
	// Each region needs at least 13 bytes, which bounds the allocation by
	// the input size as well as by MaxRegions.
	if nr > MaxRegions || uint64(nr)*13 > uint64(len(d.b)) {
		d.fail("region count out of range")
	}
	if d.err == nil && nr > 0 {
		a.Regions = make([]Region, 0, nr)
	}
	for i := uint32(0); i < nr && d.err == nil; i++ {
		a.Regions = append(a.Regions, d.region())
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	if d.err != nil {
		return nil, d.err
	}
	if err := validate(a); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return a, nil
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(why string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrMalformed, why)
	}
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("truncated")
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u8() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (d *decoder) str8() string { return string(d.take(int(d.u8()))) }

func (d *decoder) bytes32(limit int) []byte {
	n := d.u32()
	if n > uint32(limit) {
		d.fail("field too long")
		return nil
	}
	return append([]byte(nil), d.take(int(n))...)
}

func (d *decoder) region() Region {
	r := Region{ID: d.u32(), Len: d.u64()}
	nk := int(d.u8())
	if nk > MaxKeysPerReg {
		d.fail("too many keys")
	}
	for i := 0; i < nk && d.err == nil; i++ {
		r.Keys = append(r.Keys, Key{Backend: d.str8(), Key: d.bytes32(MaxKeyLen)})
	}
	return r
}
