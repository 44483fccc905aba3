package ucx

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

var sampleHeader = header{key: 0xABC<<32 | 7, index: 0, count: 2, region: 1, off: 4096,
	addr: []byte("ucx-worker-address"), from: "prefill-0", notif: []byte("done"), hasNtf: true}

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []header{
		sampleHeader,
		{key: 1, index: 1, count: 2, region: 2, off: 0},                                                                      // a later pair: no WRITE fields
		{addr: []byte{}, from: "", notif: []byte{}},                                                                          // a notification-only WRITE, all empty
		{count: 1, addr: []byte("a"), from: "x", notif: []byte{}, hasNtf: true},                                              // an empty notification is still one
		{key: 1<<64 - 1, index: 1<<32 - 2, count: 1<<32 - 1, region: 1<<32 - 1, off: 1<<64 - 1},                              // largest numbers
		{count: 1, addr: []byte("a"), from: string(bytes.Repeat([]byte("n"), 255)), notif: bytes.Repeat([]byte("m"), 1<<16)}, // longest name
	} {
		b := appendHeader(nil, &h)
		if h.index != 0 && len(b) != pairHeaderBytes {
			t.Errorf("%+v: %d bytes, want %d", h, len(b), pairHeaderBytes)
		}
		got, err := parseHeader(b)
		if err != nil {
			t.Fatalf("%+v: %v", h, err)
		}
		if !bytes.Equal(appendHeader(nil, &got), b) || got.key != h.key || got.index != h.index || got.count != h.count ||
			got.region != h.region || got.off != h.off || got.from != h.from || got.hasNtf != h.hasNtf ||
			!bytes.Equal(got.addr, h.addr) || !bytes.Equal(got.notif, h.notif) {
			t.Errorf("round trip: got %+v, want %+v", got, h)
		}
	}
}

func TestParseHeaderRejects(t *testing.T) {
	good := appendHeader(nil, &sampleHeader)
	flag := pairHeaderBytes + 4 + len(sampleHeader.addr) + 1 + len(sampleHeader.from)
	badFlag := bytes.Clone(good)
	badFlag[flag] = 2
	later := appendHeader(nil, &header{key: 1, index: 1, count: 2})
	index := func(i, n uint32) []byte {
		b := bytes.Clone(later)
		binary.LittleEndian.PutUint32(b[8:], i)
		binary.LittleEndian.PutUint32(b[12:], n)
		return b
	}
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"empty":                         {nil, errShort},
		"every prefix":                  {good[:len(good)-1], errShort},
		"a byte too many":               {append(bytes.Clone(good), 0), errLong},
		"a later pair with a byte more": {append(bytes.Clone(later), 0), errLong},
		"address past the end":          {append(bytes.Clone(good[:pairHeaderBytes]), 0xff, 0xff, 0xff, 0xff, 1), errShort},
		"notification flag 2":           {badFlag, errBadFlag},
		"index = count":                 {index(2, 2), errIndex},
		"index past count":              {index(7, 2), errIndex},
		"later pair of a 0-pair write":  {index(1, 0), errIndex},
	} {
		if _, err := parseHeader(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", name, err, tc.want)
		}
	}
	for i := range good { // no strict prefix is a header
		if _, err := parseHeader(good[:i]); err == nil {
			t.Errorf("prefix of %d bytes parsed", i)
		}
	}
}

// FuzzParseHeader: parsing never panics, and whatever parses is exactly
// what the encoder writes for the parsed value (one encoding per header).
func FuzzParseHeader(f *testing.F) {
	f.Add(appendHeader(nil, &sampleHeader))
	f.Add(appendHeader(nil, &header{key: 1, index: 1, count: 2}))
	f.Add([]byte{})
	f.Add(appendHeader(nil, &header{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHeader(b)
		if err != nil {
			return
		}
		if re := appendHeader(nil, &h); !bytes.Equal(re, b) {
			t.Fatalf("parsed %+v re-encodes as %x, not %x", h, re, b)
		}
	})
}
