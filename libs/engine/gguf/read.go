package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// ErrFormat is wrapped by every error about a file that is not a GGUF file
// this reader accepts: a bad magic or version, a truncated header, a claim
// (a length, a count, a type) out of bounds.
var ErrFormat = errors.New("gguf: malformed file")

// Bounds on what a header may claim. The reader never allocates by a claim
// alone (slices grow with the bytes actually read), so these only turn a
// corrupt count into an early, precise error instead of a long read to EOF.
// Real files stay far below them: the largest vocabularies hold ~10^6
// strings, chat templates a few hundred KiB.
const (
	maxString     = 1 << 26 // bytes in one string
	maxArrayLen   = 1 << 28 // entries in one array
	maxKVs        = 1 << 20
	maxTensors    = 1 << 24
	maxDims       = 4 // GGML_MAX_DIMS
	maxArrayDepth = 8 // arrays of arrays of ...
	// growChunk is the most a slice is grown ahead of the data, so a claim
	// of a billion entries costs at most this much before EOF says no.
	growChunk = 1 << 16
)

// Metadata is the header of a GGUF file: everything but the tensor data.
type Metadata struct {
	Version uint32
	// KVs are the metadata entries in file order. Scalar values are
	// uint8, int8, uint16, int16, uint32, int32, float32, bool, string,
	// uint64, int64 or float64; arrays are a slice of one of those
	// ([]uint8 ... []string), and an array of arrays is []any holding one
	// such slice (or []any, deeper) per entry.
	KVs     []KV
	Tensors []TensorInfo
	// Alignment of the tensor data: general.alignment, or 32.
	Alignment uint64
	// DataOffset is the file offset where tensor data starts (Offset 0 of
	// every TensorInfo is relative to it).
	DataOffset uint64
}

// TensorInfo describes one tensor without its data.
type TensorInfo struct {
	Name string
	// Dims is ggml's ne: Dims[0] is the contiguous dimension.
	Dims []uint64
	// Type is the ggml type tag (0 = F32, 1 = F16, ...).
	Type uint32
	// Offset of the tensor's data from Metadata.DataOffset.
	Offset uint64
}

// Get returns the value of key and whether the file has it.
func (m Metadata) Get(key string) (any, bool) {
	for _, kv := range m.KVs {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// ReadMetadataFile reads the header of the GGUF file at path.
func ReadMetadataFile(path string) (Metadata, error) {
	f, err := os.Open(path)
	if err != nil {
		return Metadata{}, fmt.Errorf("gguf: %w", err)
	}
	defer f.Close()
	md, err := ReadMetadata(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		return Metadata{}, fmt.Errorf("%s: %w", path, err)
	}
	return md, nil
}

// ReadMetadata reads a GGUF header (version 2 or 3, little-endian) from r:
// the metadata entries and tensor infos, stopping where tensor data
// starts. Every error wraps ErrFormat (or is r's own error) and names the
// byte offset and the entry it was reading.
func ReadMetadata(r io.Reader) (Metadata, error) {
	md, err := (&decoder{r: r}).header()
	if err != nil {
		return Metadata{}, err
	}
	return md, nil
}

func (d *decoder) header() (Metadata, error) {
	var md Metadata
	switch m := d.u32(); {
	case d.err != nil:
		return md, d.fail("magic")
	case m == bswap32(magic):
		return md, d.failf("magic %#08x is GGUF's byte-swapped: big-endian files are not supported", m)
	case m != magic:
		return md, d.failf("magic %#08x, want %#08x (\"GGUF\")", m, uint32(magic))
	}
	md.Version = d.u32()
	switch {
	case d.err != nil:
		return md, d.fail("version")
	case md.Version == 1:
		return md, d.failf("GGUF version 1 is not supported (want 2 or 3)")
	case md.Version < 2 || md.Version > 3:
		return md, d.failf("GGUF version %d, want 2 or 3", md.Version)
	}
	nt, nkv := d.u64(), d.u64()
	switch {
	case d.err != nil:
		return md, d.fail("counts")
	case nt > maxTensors:
		return md, d.failf("%d tensors claimed, more than %d", nt, maxTensors)
	case nkv > maxKVs:
		return md, d.failf("%d metadata entries claimed, more than %d", nkv, maxKVs)
	}
	md.KVs = make([]KV, 0, min(nkv, growChunk))
	for i := range nkv {
		kv, err := d.kv()
		if err != nil {
			return md, fmt.Errorf("metadata entry %d of %d: %w", i, nkv, err)
		}
		md.KVs = append(md.KVs, kv)
	}
	md.Tensors = make([]TensorInfo, 0, min(nt, growChunk))
	for i := range nt {
		ti, err := d.tensorInfo()
		if err != nil {
			return md, fmt.Errorf("tensor info %d of %d: %w", i, nt, err)
		}
		md.Tensors = append(md.Tensors, ti)
	}
	md.Alignment = Alignment
	if v, ok := md.Get("general.alignment"); ok {
		a, ok := v.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return md, fmt.Errorf("%w: general.alignment = %v (%T), want a power of two as uint32", ErrFormat, v, v)
		}
		md.Alignment = uint64(a)
	}
	md.DataOffset = (d.off + md.Alignment - 1) / md.Alignment * md.Alignment
	for _, ti := range md.Tensors {
		if ti.Offset%md.Alignment != 0 {
			return md, fmt.Errorf("%w: tensor %q at offset %d, not a multiple of the alignment %d", ErrFormat, ti.Name, ti.Offset, md.Alignment)
		}
	}
	return md, nil
}

func (d *decoder) kv() (KV, error) {
	key := d.str()
	if d.err != nil {
		return KV{}, d.fail("key")
	}
	t := ValueType(d.u32())
	if d.err != nil {
		return KV{}, d.fail(fmt.Sprintf("type of %q", key))
	}
	v := d.value(t, 0)
	if d.err != nil {
		return KV{}, fmt.Errorf("key %q: %w", key, d.err)
	}
	return KV{Key: key, Value: v}, nil
}

func (d *decoder) tensorInfo() (TensorInfo, error) {
	var ti TensorInfo
	ti.Name = d.str()
	if d.err != nil {
		return ti, d.fail("name")
	}
	n := d.u32()
	if d.err != nil {
		return ti, d.fail(fmt.Sprintf("tensor %q dimensions", ti.Name))
	}
	if n == 0 || n > maxDims {
		return ti, d.failf("tensor %q has %d dimensions, want 1 to %d", ti.Name, n, maxDims)
	}
	ti.Dims = make([]uint64, n)
	elems := uint64(1)
	for i := range ti.Dims {
		ti.Dims[i] = d.u64()
		if ti.Dims[i] != 0 && elems > math.MaxInt64/ti.Dims[i] {
			return ti, d.failf("tensor %q dimensions %v overflow", ti.Name, ti.Dims[:i+1])
		}
		elems *= ti.Dims[i]
	}
	ti.Type = d.u32()
	ti.Offset = d.u64()
	if d.err != nil {
		return ti, d.fail(fmt.Sprintf("tensor %q", ti.Name))
	}
	return ti, nil
}

// decoder reads little-endian values, keeping the first error and the
// offset for error messages.
type decoder struct {
	r   io.Reader
	off uint64
	err error
	b   [8]byte
}

// errorf records a format error at the current offset.
func (d *decoder) errorf(format string, args ...any) {
	d.err = fmt.Errorf("%w: at offset %d: %s", ErrFormat, d.off, fmt.Sprintf(format, args...))
}

// failf records a format error and returns it.
func (d *decoder) failf(format string, args ...any) error {
	d.errorf(format, args...)
	return d.err
}

// fail wraps the recorded error with what was being read.
func (d *decoder) fail(what string) error {
	return fmt.Errorf("reading %s: %w", what, d.err)
}

func (d *decoder) read(p []byte) {
	if d.err != nil {
		return
	}
	n, err := io.ReadFull(d.r, p)
	d.off += uint64(n)
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		d.err = fmt.Errorf("%w: at offset %d: truncated (%w)", ErrFormat, d.off, io.ErrUnexpectedEOF)
	case err != nil:
		d.err = fmt.Errorf("gguf: at offset %d: %w", d.off, err)
	}
}

func (d *decoder) u8() uint8 {
	d.read(d.b[:1])
	return d.b[0]
}

func (d *decoder) u16() uint16 {
	d.read(d.b[:2])
	return binary.LittleEndian.Uint16(d.b[:2])
}

func (d *decoder) u32() uint32 {
	d.read(d.b[:4])
	return binary.LittleEndian.Uint32(d.b[:4])
}

func (d *decoder) u64() uint64 {
	d.read(d.b[:8])
	return binary.LittleEndian.Uint64(d.b[:8])
}

// str reads a length-prefixed string. A long claim is read in pieces, so
// memory follows the bytes that are there, not the claim.
func (d *decoder) str() string {
	n := d.u64()
	if d.err != nil {
		return ""
	}
	if n > maxString {
		d.errorf("string of %d bytes claimed, more than %d", n, maxString)
		return ""
	}
	if n <= growChunk {
		b := make([]byte, n)
		d.read(b)
		return string(b)
	}
	b := make([]byte, 0, growChunk)
	for uint64(len(b)) < n && d.err == nil {
		k := min(n-uint64(len(b)), growChunk)
		b = append(b, make([]byte, k)...)
		d.read(b[uint64(len(b))-k:])
	}
	return string(b)
}

func (d *decoder) value(t ValueType, depth int) any {
	switch t {
	case TypeUint8:
		return d.u8()
	case TypeInt8:
		return int8(d.u8())
	case TypeUint16:
		return d.u16()
	case TypeInt16:
		return int16(d.u16())
	case TypeUint32:
		return d.u32()
	case TypeInt32:
		return int32(d.u32())
	case TypeFloat32:
		return math.Float32frombits(d.u32())
	case TypeBool:
		return d.u8() != 0 // llama.cpp reads any non-zero byte as true
	case TypeString:
		return d.str()
	case TypeUint64:
		return d.u64()
	case TypeInt64:
		return int64(d.u64())
	case TypeFloat64:
		return math.Float64frombits(d.u64())
	case TypeArray:
		return d.array(depth + 1)
	}
	d.errorf("unknown value type %d", t)
	return nil
}

func (d *decoder) array(depth int) any {
	if depth > maxArrayDepth {
		d.errorf("arrays nested deeper than %d", maxArrayDepth)
		return nil
	}
	et := ValueType(d.u32())
	n := d.u64()
	if d.err != nil {
		return nil
	}
	if n > maxArrayLen {
		d.errorf("array of %d entries claimed, more than %d", n, maxArrayLen)
		return nil
	}
	switch et {
	case TypeUint8:
		return readArray(d, n, d.u8)
	case TypeInt8:
		return readArray(d, n, func() int8 { return int8(d.u8()) })
	case TypeUint16:
		return readArray(d, n, d.u16)
	case TypeInt16:
		return readArray(d, n, func() int16 { return int16(d.u16()) })
	case TypeUint32:
		return readArray(d, n, d.u32)
	case TypeInt32:
		return readArray(d, n, func() int32 { return int32(d.u32()) })
	case TypeFloat32:
		return readArray(d, n, func() float32 { return math.Float32frombits(d.u32()) })
	case TypeBool:
		return readArray(d, n, func() bool { return d.u8() != 0 })
	case TypeString:
		return readArray(d, n, d.str)
	case TypeUint64:
		return readArray(d, n, d.u64)
	case TypeInt64:
		return readArray(d, n, func() int64 { return int64(d.u64()) })
	case TypeFloat64:
		return readArray(d, n, func() float64 { return math.Float64frombits(d.u64()) })
	case TypeArray:
		return readArray(d, n, func() any { return d.array(depth + 1) })
	}
	d.errorf("array of unknown value type %d", et)
	return nil
}

// readArray reads n values with next, growing the slice with the data.
func readArray[T any](d *decoder, n uint64, next func() T) []T {
	out := make([]T, 0, min(n, growChunk))
	for i := uint64(0); i < n && d.err == nil; i++ {
		v := next()
		if d.err != nil {
			d.err = fmt.Errorf("entry %d of %d: %w", i, n, d.err)
			return nil
		}
		out = append(out, v)
	}
	return out
}

func bswap32(v uint32) uint32 {
	return v>>24 | v>>8&0xff00 | v<<8&0xff0000 | v<<24
}
