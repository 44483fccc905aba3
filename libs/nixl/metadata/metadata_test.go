package metadata

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func sample() *Agent {
	return &Agent{
		Name: "prefill-0", Epoch: 42, Gen: 7,
		Backends: []Backend{
			{Name: "tcp", Address: []byte("127.0.0.1:4000")},
			{Name: "ucx", Address: []byte{0, 1, 2, 3}},
		},
		Regions: []Region{
			{ID: 1, Len: 1 << 30, Keys: []Key{{Backend: "ucx", Key: []byte{9, 9}}}},
			{ID: 2, Len: 4096},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		a    *Agent
	}{
		{"full", sample()},
		{"bare", &Agent{Name: "x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			blob, err := Encode(tc.a)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(blob)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.a) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tc.a)
			}
		})
	}
}

// TestGolden pins the wire format: peers built from other commits must
// keep decoding what this one publishes, and it must keep decoding what
// version 1 published.
func TestGolden(t *testing.T) {
	t.Parallel()
	a := &Agent{
		Name: "a", Epoch: 0x0102030405060708, Gen: 9,
		Backends: []Backend{{Name: "tcp", Address: []byte("h:1")}},
		Regions:  []Region{{ID: 7, Len: 16, Keys: []Key{{Backend: "ucx", Key: []byte{0xAB}}}}},
	}
	blob, err := Encode(a)
	if err != nil {
		t.Fatal(err)
	}
	tail := "\x01\x03tcp\x00\x00\x00\x03h:1" +
		"\x00\x00\x00\x01\x00\x00\x00\x07\x00\x00\x00\x00\x00\x00\x00\x10\x01\x03ucx\x00\x00\x00\x01\xAB"
	want := []byte("NIXL\x02\x01a\x01\x02\x03\x04\x05\x06\x07\x08\x00\x00\x00\x00\x00\x00\x00\x09" + tail)
	if !bytes.Equal(blob, want) {
		t.Fatalf("encoding changed:\n got %q\nwant %q", blob, want)
	}
	v1, err := Decode([]byte("NIXL\x01\x01a" + tail))
	if err != nil {
		t.Fatal(err)
	}
	a.Epoch, a.Gen = 0, 0
	if !reflect.DeepEqual(v1, a) {
		t.Fatalf("version 1 decoded to %+v, want %+v", v1, a)
	}
}

func TestNewer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b Agent
		want bool
	}{
		{Agent{Epoch: 1, Gen: 2}, Agent{Epoch: 1, Gen: 1}, true},
		{Agent{Epoch: 1, Gen: 1}, Agent{Epoch: 1, Gen: 1}, false},
		{Agent{Epoch: 1, Gen: 1}, Agent{Epoch: 1, Gen: 2}, false},
		{Agent{Epoch: 2, Gen: 1}, Agent{Epoch: 1, Gen: 5}, false}, // another run: not ordered
		{Agent{Gen: 2}, Agent{Gen: 1}, false},                     // version 1 blobs
	}
	for _, tt := range tests {
		if got := tt.a.Newer(&tt.b); got != tt.want {
			t.Errorf("%+v.Newer(%+v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	good, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		blob []byte
	}{
		{"empty", nil},
		{"magic", append([]byte("XIXL"), good[4:]...)},
		{"version", append(append([]byte("NIXL"), 9), good[5:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing", append(append([]byte(nil), good...), 0)},
		{"empty name", []byte("NIXL\x01\x00\x00\x00\x00\x00\x00")},
		{"v2 without generation", []byte("NIXL\x02\x01a\x00\x00\x00\x00\x00\x00\x00\x01")},
		{"huge region count", []byte("NIXL\x01\x01a\x00\xff\xff\xff\xff")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Decode(tc.blob); !errors.Is(err, ErrMalformed) {
				t.Fatalf("Decode err = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestEncodeRejects(t *testing.T) {
	t.Parallel()
	if _, err := Encode(&Agent{}); err == nil {
		t.Fatal("Encode accepted an empty name")
	}
}

func FuzzDecode(f *testing.F) {
	good, _ := Encode(sample())
	f.Add(good)
	f.Add([]byte("NIXL\x01"))
	f.Fuzz(func(t *testing.T, blob []byte) {
		a, err := Decode(blob)
		if err != nil {
			return
		}
		again, err := Encode(a)
		if err != nil {
			t.Fatalf("decoded value does not re-encode: %v", err)
		}
		// Encode writes the current version; a version 1 blob (still
		// decoded) comes back as the same value, not the same bytes.
		if blob[4] == Version && !bytes.Equal(again, blob) {
			t.Fatalf("re-encoding differs")
		}
		if back, err := Decode(again); err != nil || !reflect.DeepEqual(back, a) {
			t.Fatalf("re-encoded value decodes to %+v, %v; want %+v", back, err, a)
		}
	})
}

// Endpoints changes with the name, the run and any backend address, not
// with the regions or the generation, nor with the backends' order.
func TestEndpoints(t *testing.T) {
	t.Parallel()
	base := Agent{Name: "decode-1", Epoch: 7, Gen: 3,
		Backends: []Backend{{Name: "tcp", Address: []byte("10.0.0.1:4000")}, {Name: "ucx", Address: []byte{1, 2, 3}}},
		Regions:  []Region{{ID: 1, Len: 4096}}}
	want := base.Endpoints()
	if len(want) != 64 {
		t.Fatalf("Endpoints() = %q, want 64 hex characters", want)
	}
	same := base
	same.Gen, same.Regions = 9, nil
	same.Backends = []Backend{base.Backends[1], base.Backends[0]}
	if got := same.Endpoints(); got != want {
		t.Errorf("other generation, regions and backend order: %s, want %s", got, want)
	}
	for name, change := range map[string]func(a *Agent){
		"name":  func(a *Agent) { a.Name = "decode-2" },
		"epoch": func(a *Agent) { a.Epoch = 8 },
		"address": func(a *Agent) {
			a.Backends = []Backend{{Name: "tcp", Address: []byte("10.0.0.9:4000")}, base.Backends[1]}
		},
		"backend": func(a *Agent) { a.Backends = base.Backends[:1] },
		// Length-prefixed fields: moving a byte from name to address differs.
		"boundary": func(a *Agent) {
			a.Backends = []Backend{{Name: "tc", Address: []byte("p10.0.0.1:4000")}, base.Backends[1]}
		},
	} {
		a := base
		change(&a)
		if a.Endpoints() == want {
			t.Errorf("changing the %s kept the digest", name)
		}
	}
}
