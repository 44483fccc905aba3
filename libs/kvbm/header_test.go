package kvbm

import (
	"bytes"
	"encoding/hex"
	"errors"
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
