package kvbm

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"reflect"
	"testing"
)

func TestBlockRoundTrip(t *testing.T) {
	t.Parallel()
	for _, m := range []Meta{
		{Hash: 1, Parent: 0},
		{Hash: 0xfedcba9876543210, Parent: 0x0123456789abcdef, Tokens: []uint32{1, 2, 3, 65535, 1 << 31}},
	} {
		data := bytes.Repeat([]byte{0xab, 0x01}, 300)
		got, gotData, err := DecodeBlock(EncodeBlock(m, data))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) || !bytes.Equal(gotData, data) {
			t.Errorf("round trip of %+v: %+v, %d bytes", m, got, len(gotData))
		}
	}
}

// The encoding is a format on disk and in object stores: pinned here byte
// for byte.
func TestBlockGolden(t *testing.T) {
	t.Parallel()
	got := hex.EncodeToString(EncodeBlock(Meta{Hash: 0x1122334455667788, Parent: 0x99, Tokens: []uint32{7, 8}}, []byte("kv")))
	// Computed independently (a bitwise CRC-32C in Python).
	const want = "53594b56010000008877665544332211990000000000000002000000108a378f0200000007000000080000005b6c487d6b76"
	if got != want {
		t.Errorf("encoding changed:\n got %s\nwant %s", got, want)
	}
}

func TestBlockCorrupt(t *testing.T) {
	t.Parallel()
	good := EncodeBlock(Meta{Hash: 5, Parent: 4, Tokens: []uint32{9}}, []byte("payload"))
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	tests := map[string][]byte{
		"empty":           nil,
		"short":           good[:10],
		"magic":           flip(0),
		"version":         flip(4),
		"hash":            flip(9),
		"token":           flip(36),
		"header checksum": flip(HeaderLen(1) - 1),
		"data":            flip(len(good) - 1),
		"truncated data":  good[:len(good)-1],
		"extra data":      append(bytes.Clone(good), 0),
	}
	for name, b := range tests {
		if _, _, err := DecodeBlock(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v; want ErrCorrupt", name, err)
		}
	}
}

// FuzzDecodeBlock: no input panics or over-allocates, and whatever decodes
// encodes back to the same bytes.
func FuzzDecodeBlock(f *testing.F) {
	f.Add(EncodeBlock(Meta{Hash: 1, Parent: 2, Tokens: []uint32{3}}, []byte("x")))
	f.Add(EncodeBlock(Meta{Hash: 1}, nil))
	f.Add([]byte("SYKV\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, data, err := DecodeBlock(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if re := EncodeBlock(m, data); !bytes.Equal(re, b) {
			t.Fatalf("decoded %+v re-encodes to %x, not %x", m, re, b)
		}
	})
}

// ReadBlock accepts what DecodeBlock accepts and refuses, as corrupt,
// what it refuses, whether or not the reader knows the length.
func TestReadBlock(t *testing.T) {
	t.Parallel()
	good := EncodeBlock(Meta{Hash: 5, Parent: 4, Tokens: []uint32{9, 10}}, []byte("payload"))
	for _, size := range []int64{int64(len(good)), -1} {
		dst := make([]byte, len("payload"))
		m, err := ReadBlock(bytes.NewReader(good), size, dst)
		if err != nil || m.Hash != 5 || m.Parent != 4 || !reflect.DeepEqual(m.Tokens, []uint32{9, 10}) || string(dst) != "payload" {
			t.Fatalf("size %d: %+v %q %v", size, m, dst, err)
		}
	}
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	for name, b := range map[string][]byte{
		"empty":           nil,
		"short":           good[:10],
		"magic":           flip(0),
		"version":         flip(4),
		"token count":     flip(34),
		"header checksum": flip(HeaderLen(2) - 1),
		"data":            flip(len(good) - 1),
		"truncated data":  good[:len(good)-1],
		"extra data":      append(bytes.Clone(good), 0),
	} {
		for _, size := range []int64{int64(len(b)), -1} {
			if _, err := ReadBlock(bytes.NewReader(b), size, make([]byte, len("payload"))); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%s, size %d: %v; want ErrCorrupt", name, size, err)
			}
		}
	}
	if _, err := ReadBlock(bytes.NewReader(good), int64(len(good)), make([]byte, 3)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("into a buffer of the wrong size: %v; want ErrCorrupt", err)
	}
	// A reader that ends before the length it announced broke, not the block.
	if _, err := ReadBlock(bytes.NewReader(good[:len(good)-2]), int64(len(good)), make([]byte, len("payload"))); !errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrCorrupt) {
		t.Errorf("a transfer cut short: %v; want io.ErrUnexpectedEOF", err)
	}
}

// FuzzReadBlock: the streaming decoder agrees with DecodeBlock on every
// input, read with its length known or not.
func FuzzReadBlock(f *testing.F) {
	f.Add(EncodeBlock(Meta{Hash: 1, Parent: 2, Tokens: []uint32{3}}, []byte("x")))
	f.Add(EncodeBlock(Meta{Hash: 1}, nil))
	f.Add([]byte("SYKV\x01\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, data, derr := DecodeBlock(b)
		n := len(b) - HeaderLen(0) // the one data length that can succeed
		if len(b) >= headerFixed {
			n -= 4 * int(binary.LittleEndian.Uint32(b[32:]))
		}
		for _, size := range []int64{int64(len(b)), -1} {
			dst := make([]byte, max(n, 0))
			rm, err := ReadBlock(bytes.NewReader(b), size, dst)
			switch {
			case err != nil && !errors.Is(err, ErrCorrupt):
				t.Fatalf("size %d: error %v does not wrap ErrCorrupt", size, err)
			case (err == nil) != (derr == nil):
				t.Fatalf("size %d: ReadBlock %v, DecodeBlock %v", size, err, derr)
			case err == nil && (!reflect.DeepEqual(rm, m) || !bytes.Equal(dst, data)):
				t.Fatalf("size %d: ReadBlock %+v %x, DecodeBlock %+v %x", size, rm, dst, m, data)
			}
		}
	})
}
