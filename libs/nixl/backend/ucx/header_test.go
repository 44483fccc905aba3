package ucx

import (
	"bytes"
	"errors"
	"testing"
)

func encodeHeader(h header) []byte {
	b := appendHeaderStart(nil, h.addr, h.dseq, len(h.pairs), h.from, h.notif, h.hasNtf)
	for _, p := range h.pairs {
		b = appendHeaderPair(b, p.region, p.off, p.len)
	}
	return b
}

var sampleHeader = header{addr: []byte("ucx-worker-address"), dseq: 7, from: "prefill-0", notif: []byte("done"), hasNtf: true,
	pairs: []hdrPair{{1, 4096, 65536}, {2, 0, 1}}}

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []header{
		sampleHeader,
		{addr: []byte{}, from: "", notif: []byte{}, pairs: []hdrPair{}},                                                // all empty, no notification
		{addr: []byte("a"), from: "x", notif: []byte{}, hasNtf: true, pairs: []hdrPair{}},                              // an empty notification is still one
		{addr: []byte("a"), from: string(bytes.Repeat([]byte("n"), 255)), pairs: []hdrPair{{0, 1<<64 - 1, 1<<64 - 1}}}, // longest name, largest numbers
	} {
		b := encodeHeader(h)
		got, err := parseHeader(b)
		if err != nil {
			t.Fatalf("%+v: %v", h, err)
		}
		if !bytes.Equal(encodeHeader(got), b) || got.from != h.from || got.hasNtf != h.hasNtf || len(got.pairs) != len(h.pairs) {
			t.Errorf("round trip: got %+v, want %+v", got, h)
		}
	}
}

func TestParseHeaderRejects(t *testing.T) {
	good := encodeHeader(sampleHeader)
	flag := 4 + len(sampleHeader.addr) + 4 + 4 + 1 + len(sampleHeader.from)
	badFlag := bytes.Clone(good)
	badFlag[flag] = 2
	for name, tc := range map[string]struct {
		b    []byte
		want error
	}{
		"empty":                {nil, errShort},
		"every prefix":         {good[:len(good)-1], errShort},
		"a byte too many":      {append(bytes.Clone(good), 0), errShort},
		"address past the end": {[]byte{0xff, 0xff, 0xff, 0xff, 1}, errShort},
		"notification flag 2":  {badFlag, errBadFlag},
		"pair count too large": {appendHeaderStart(nil, nil, 0, 1<<32-1, "", nil, false), errShort},
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
	f.Add(encodeHeader(sampleHeader))
	f.Add([]byte{})
	f.Add(appendHeaderStart(nil, nil, 0, 0, "", nil, false))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := parseHeader(b)
		if err != nil {
			return
		}
		if re := encodeHeader(h); !bytes.Equal(re, b) {
			t.Fatalf("parsed %+v re-encodes as %x, not %x", h, re, b)
		}
	})
}
