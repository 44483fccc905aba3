// Package gguf writes GGUF files, the model format of llama.cpp, and
// converts llama2.c checkpoints into it, so that the models the built-in
// engine serves can be served by llama.cpp too, with the same weights,
// tokenizer and context: a worker driving llama-server must produce the
// same greedy text as one running the built-in engine.
//
// Only what the conversion needs is here: GGUF version 3, little-endian,
// float32 tensors, the metadata value types scalars, strings and arrays
// of them. llama.cpp's own converter for llama2.c checkpoints fixes the
// context at 128 tokens; this one keeps the checkpoint's.
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

// KV is one metadata entry. Value is a uint32, int32, float32, bool,
// string, uint64, or a []string, []float32, []int32 or []uint32.
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
	switch v := v.(type) {
	case uint32:
		e.u32(uint32(TypeUint32))
		e.u32(v)
	case int32:
		e.u32(uint32(TypeInt32))
		e.u32(uint32(v))
	case float32:
		e.u32(uint32(TypeFloat32))
		e.u32(math.Float32bits(v))
	case bool:
		e.u32(uint32(TypeBool))
		b := byte(0)
		if v {
			b = 1
		}
		e.raw([]byte{b})
	case string:
		e.u32(uint32(TypeString))
		e.str(v)
	case uint64:
		e.u32(uint32(TypeUint64))
		e.u64(v)
	case []string:
		e.array(TypeString, len(v))
		for _, s := range v {
			e.str(s)
		}
	case []float32:
		e.array(TypeFloat32, len(v))
		for _, f := range v {
			e.u32(math.Float32bits(f))
		}
	case []int32:
		e.array(TypeInt32, len(v))
		for _, x := range v {
			e.u32(uint32(x))
		}
	case []uint32:
		e.array(TypeUint32, len(v))
		for _, x := range v {
			e.u32(x)
		}
	default:
		return fmt.Errorf("%w: unsupported metadata value of type %T", ErrShape, v)
	}
	return nil
}

func (e *encoder) array(t ValueType, n int) {
	e.u32(uint32(TypeArray))
	e.u32(uint32(t))
	e.u64(uint64(n))
}
