// Package gguf reads and writes GGUF files, the model format of llama.cpp.
//
// Writing converts llama2.c checkpoints, so that the models the built-in
// engine serves can be served by llama.cpp too, with the same weights,
// tokenizer and context: a worker driving llama-server must produce the
// same greedy text as one running the built-in engine. Only what the
// conversion needs of tensors is written (GGUF version 3, little-endian,
// float32); metadata values may be of any GGUF type. llama.cpp's own
// converter for llama2.c checkpoints fixes the context at 128 tokens; this
// one keeps the checkpoint's.
//
// Reading (ReadMetadata) parses a header, version 2 or 3, without the
// tensor data: the metadata entries of every value type, arrays of arrays
// included, and the tensor infos. A corrupt file is an error wrapping
// ErrFormat that names the offset and entry, never an allocation of what
// a length field claims. Vocab turns a model's tokenizer.ggml.* entries
// into a tokenizer.Vocab, applying the defaults and fix-ups llama.cpp
// applies when it loads the file, so the frontend tokenizes a prompt as
// the llama.cpp engine serving that file does.
package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Version is the GGUF version written.
const Version = 3

// Alignment is the alignment of tensor data, GGUF's default (the file
// carries no general.alignment key, so readers assume it).
const Alignment = 32

// magic is "GGUF" read as a little-endian uint32.
const magic = 0x46554747

// ValueType is a metadata value's type tag.
type ValueType uint32

// Metadata value types, as GGUF numbers them.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

// TensorF32 is ggml's type tag for float32 tensors.
const TensorF32 uint32 = 0

// KV is one metadata entry. Value is one of GGUF's scalars as its Go type
// (uint8, int8, uint16, int16, uint32, int32, float32, bool, string,
// uint64, int64, float64), an array as a slice of one of them, or an array
// of arrays as []any whose entries are such slices (or []any, deeper).
type KV struct {
	Key   string
	Value any
}

// Tensor is one float32 tensor. Dims lists ggml's ne: Dims[0] is the
// contiguous dimension (a row-major rows x cols matrix is {cols, rows}).
// Data is its values as little-endian float32 bytes.
type Tensor struct {
	Name string
	Dims []uint64
	Data []byte
}

// ErrShape is wrapped by errors about tensors whose data does not match
// their dimensions, and about unsupported metadata values.
var ErrShape = errors.New("gguf: bad tensor or value")

// Write writes a GGUF file of kvs and tensors to w, tensors in order.
func Write(w io.Writer, kvs []KV, tensors []Tensor) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	e := &encoder{w: bw}
	e.u32(magic)
	e.u32(Version)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.Key)
		if err := e.value(kv.Value); err != nil {
			return fmt.Errorf("gguf: key %q: %w", kv.Key, err)
		}
	}
	var off uint64
	for _, t := range tensors {
		n := uint64(1)
		for _, d := range t.Dims {
			n *= d
		}
		if len(t.Dims) == 0 || n*4 != uint64(len(t.Data)) {
			return fmt.Errorf("%w: tensor %q: dims %v need %d bytes, have %d", ErrShape, t.Name, t.Dims, n*4, len(t.Data))
		}
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(d)
		}
		e.u32(TensorF32)
		e.u64(off)
		off = align(off + uint64(len(t.Data)))
	}
	e.pad()
	for _, t := range tensors {
		e.raw(t.Data)
		e.pad()
	}
	if e.err != nil {
		return fmt.Errorf("gguf: %w", e.err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

func align(n uint64) uint64 { return (n + Alignment - 1) &^ (Alignment - 1) }

// encoder writes little-endian values, keeping the first error and the
// offset (for padding).
type encoder struct {
	w   io.Writer
	n   uint64
	err error
	b   [8]byte
}

func (e *encoder) raw(p []byte) {
	if e.err != nil {
		return
	}
	var n int
	n, e.err = e.w.Write(p)
	e.n += uint64(n)
}

func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.b[:4], v)
	e.raw(e.b[:4])
}

func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.b[:8], v)
	e.raw(e.b[:8])
}

func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	e.raw([]byte(s))
}

func (e *encoder) pad() {
	if k := align(e.n) - e.n; k > 0 {
		e.raw(make([]byte, k))
	}
}

func (e *encoder) value(v any) error {
	t, ok := typeOf(v)
	if !ok {
		return fmt.Errorf("%w: unsupported metadata value of type %T", ErrShape, v)
	}
	e.u32(uint32(t))
	return e.payload(v, 0)
}

// typeOf is the GGUF type tag of a Go value the writer accepts.
func typeOf(v any) (ValueType, bool) {
	switch v.(type) {
	case uint8:
		return TypeUint8, true
	case int8:
		return TypeInt8, true
	case uint16:
		return TypeUint16, true
	case int16:
		return TypeInt16, true
	case uint32:
		return TypeUint32, true
	case int32:
		return TypeInt32, true
	case float32:
		return TypeFloat32, true
	case bool:
		return TypeBool, true
	case string:
		return TypeString, true
	case uint64:
		return TypeUint64, true
	case int64:
		return TypeInt64, true
	case float64:
		return TypeFloat64, true
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool, []string, []uint64, []int64, []float64, []any:
		return TypeArray, true
	}
	return 0, false
}

// payload writes v without its type tag.
func (e *encoder) payload(v any, depth int) error {
	switch v := v.(type) {
	case uint8:
		e.raw([]byte{v})
	case int8:
		e.raw([]byte{byte(v)})
	case uint16:
		binary.LittleEndian.PutUint16(e.b[:2], v)
		e.raw(e.b[:2])
	case int16:
		binary.LittleEndian.PutUint16(e.b[:2], uint16(v))
		e.raw(e.b[:2])
	case uint32:
		e.u32(v)
	case int32:
		e.u32(uint32(v))
	case float32:
		e.u32(math.Float32bits(v))
	case bool:
		b := byte(0)
		if v {
			b = 1
		}
		e.raw([]byte{b})
	case string:
		e.str(v)
	case uint64:
		e.u64(v)
	case int64:
		e.u64(uint64(v))
	case float64:
		e.u64(math.Float64bits(v))
	case []uint8:
		e.array(TypeUint8, len(v))
		e.raw(v)
	case []int8:
		return writeArray(e, TypeInt8, v, depth)
	case []uint16:
		return writeArray(e, TypeUint16, v, depth)
	case []int16:
		return writeArray(e, TypeInt16, v, depth)
	case []uint32:
		return writeArray(e, TypeUint32, v, depth)
	case []int32:
		return writeArray(e, TypeInt32, v, depth)
	case []float32:
		return writeArray(e, TypeFloat32, v, depth)
	case []bool:
		return writeArray(e, TypeBool, v, depth)
	case []string:
		return writeArray(e, TypeString, v, depth)
	case []uint64:
		return writeArray(e, TypeUint64, v, depth)
	case []int64:
		return writeArray(e, TypeInt64, v, depth)
	case []float64:
		return writeArray(e, TypeFloat64, v, depth)
	case []any:
		return e.nested(v, depth)
	default:
		return fmt.Errorf("%w: unsupported metadata value of type %T", ErrShape, v)
	}
	return nil
}

func writeArray[T any](e *encoder, t ValueType, v []T, depth int) error {
	e.array(t, len(v))
	for _, x := range v {
		if err := e.payload(x, depth); err != nil {
			return err
		}
	}
	return nil
}

// nested writes an array of arrays: every entry must be an array.
func (e *encoder) nested(v []any, depth int) error {
	if depth >= maxArrayDepth {
		return fmt.Errorf("%w: arrays nested deeper than %d", ErrShape, maxArrayDepth)
	}
	for i, x := range v {
		if t, _ := typeOf(x); t != TypeArray {
			return fmt.Errorf("%w: array of arrays has a %T at %d", ErrShape, x, i)
		}
	}
	e.array(TypeArray, len(v))
	for _, x := range v {
		if err := e.payload(x, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// array writes an array's header: its element type and length (the
// TypeArray tag before it is the value's, or the enclosing array's).
func (e *encoder) array(t ValueType, n int) {
	e.u32(uint32(t))
	e.u64(uint64(n))
}
