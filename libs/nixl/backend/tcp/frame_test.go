package tcp

import (
	"bytes"
	"errors"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	t.Parallel()
	for _, h := range []header{
		{op: opHello, len: 4},
		{op: opWrite, region: 3, id: 1 << 40, offset: 1 << 33, len: maxChunk},
		{op: opRead, region: 1, id: 2, len: 1},
		{op: opNotif, id: 9, len: maxNotif},
		{op: opResp, status: statusOutOfRange, id: 7},
	} {
		var b [headerLen]byte
		h.put(b[:])
		got, err := decodeHeader(b[:])
		if err != nil || got != h {
			t.Fatalf("round trip %+v: got %+v, %v", h, got, err)
		}
	}
}

func TestHeaderRejects(t *testing.T) {
	t.Parallel()
	enc := func(h header) []byte {
		var b [headerLen]byte
		h.put(b[:])
		return b[:]
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"short", make([]byte, headerLen-1)},
		{"magic", append([]byte{'X'}, enc(header{op: opRead})[1:]...)},
		{"op zero", enc(header{op: 0})},
		{"op unknown", enc(header{op: 99})},
		{"huge write", enc(header{op: opWrite, len: maxChunk + 1})},
		{"huge notif", enc(header{op: opNotif, len: maxNotif + 1})},
		{"huge hello", enc(header{op: opHello, len: maxHelloLen + 1})},
		{"status on request", enc(header{op: opWrite, status: 1})},
		{"bad status", enc(header{op: opResp, status: 99})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := decodeHeader(tc.b); !errors.Is(err, errFrame) {
				t.Fatalf("err = %v, want errFrame", err)
			}
		})
	}
}

func FuzzDecodeHeader(f *testing.F) {
	var b [headerLen]byte
	(&header{op: opWrite, region: 1, id: 2, offset: 3, len: 4}).put(b[:])
	f.Add(b[:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		h, err := decodeHeader(in)
		if err != nil {
			return
		}
		var out [headerLen]byte
		h.put(out[:])
		if !bytes.Equal(out[:], in[:headerLen]) {
			t.Fatalf("re-encoding differs: %x vs %x", out, in[:headerLen])
		}
	})
}
