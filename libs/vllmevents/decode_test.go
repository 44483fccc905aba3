package vllmevents

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"switchyard.dev/libs/kvtier"
)

func TestDecodeVariants(t *testing.T) {
	t.Parallel()
	stored := func(fields ...any) arr { return append(arr{"BlockStored"}, fields...) }
	tests := []struct {
		name  string
		value any
		check func(t *testing.T, b *Batch)
	}{
		{
			name:  "empty events",
			value: arr{0.0, arr{}},
			check: func(t *testing.T, b *Batch) {
				if len(b.Events) != 0 || b.HasDPRank {
					t.Fatalf("%+v", b)
				}
			},
		},
		{
			name:  "integer timestamp and extra batch fields",
			value: arr{7, arr{}, 2, "future", arr{1}},
			check: func(t *testing.T, b *Batch) {
				if b.TS != 7 || b.DPRank != 2 {
					t.Fatalf("%+v", b)
				}
			},
		},
		{
			name:  "only block hashes",
			value: arr{1.0, arr{stored(ints(1, 2))}},
			check: func(t *testing.T, b *Batch) {
				s := b.Events[0].Stored
				if len(s.Hashes) != 2 || s.HasParent || s.BlockSize != 0 {
					t.Fatalf("%+v", s)
				}
			},
		},
		{
			name:  "unknown trailing event fields",
			value: arr{1.0, arr{stored(ints(1), nil, tokens(2, 0), 2, nil, "Disk", "l", arr{nil}, "new", kv{"x", 1})}},
			check: func(t *testing.T, b *Batch) {
				if s := b.Events[0].Stored; s.Tier != kvtier.Disk || s.LoraName != "l" {
					t.Fatalf("%+v", s)
				}
			},
		},
		{
			name: "extra keys: all nil, then one set",
			value: arr{1.0, arr{stored(ints(1, 2), nil, tokens(4, 0), 2, nil, "GPU", nil, arr{nil, nil}),
				stored(ints(3), 2, tokens(2, 9), 2, nil, "GPU", nil, arr{arr{"salt-1"}})}},
			check: func(t *testing.T, b *Batch) {
				if b.Events[0].Stored.HasExtraKeys || !b.Events[1].Stored.HasExtraKeys {
					t.Fatalf("%+v", b.Events)
				}
			},
		},
		{
			name:  "unknown array event skipped",
			value: arr{1.0, arr{arr{"Resized", 3, arr{1}}, arr{"AllBlocksCleared", "extra"}}},
			check: func(t *testing.T, b *Batch) {
				if b.Skipped != 1 || len(b.Events) != 1 || b.Events[0].Kind != KindCleared {
					t.Fatalf("%+v", b)
				}
			},
		},
		{
			name:  "map event with type last",
			value: arr{1.0, arr{kv{"block_hashes", ints(5), "medium", "cuda", "type", "BlockRemoved"}}},
			check: func(t *testing.T, b *Batch) {
				if e := b.Events[0]; e.Kind != KindRemoved || e.Removed.Hashes[0] != 5 || e.Removed.Tier != kvtier.Device {
					t.Fatalf("%+v", e)
				}
			},
		},
		{
			name:  "short digest is zero-extended",
			value: arr{1.0, arr{stored(arr{[]byte{1, 2}, "\x03"})}},
			check: func(t *testing.T, b *Batch) {
				if h := b.Events[0].Stored.Hashes; h[0] != 0x0102 || h[1] != 3 {
					t.Fatalf("%x", h)
				}
			},
		},
		{
			name:  "int8..int64 and uint8..uint64 hashes",
			value: arr{1.0, arr{stored(ints[int64](-1, -200, -40000, -3000000000, 200, 40000, 3000000000))}},
			check: func(t *testing.T, b *Batch) {
				want := []uint64{1<<64 - 1, 1<<64 - 200, 1<<64 - 40000, 1<<64 - 3000000000, 200, 40000, 3000000000}
				for i, h := range b.Events[0].Stored.Hashes {
					if h != want[i] {
						t.Fatalf("hash %d = %d, want %d", i, h, want[i])
					}
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := DecodeBatch(newEnc().v(tc.value).buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, b)
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"not a container", newEnc().v(1).buf.Bytes()},
		{"batch too short", newEnc().v(arr{1.0}).buf.Bytes()},
		{"events not an array", newEnc().v(arr{1.0, 3}).buf.Bytes()},
		{"ts not a number", newEnc().v(arr{"x", arr{}}).buf.Bytes()},
		{"batch map without events", newEnc().v(kv{"ts", 1.0}).buf.Bytes()},
		{"event map without type", newEnc().v(arr{1.0, arr{kv{"block_hashes", arr{}}}}).buf.Bytes()},
		{"empty event array", newEnc().v(arr{1.0, arr{arr{}}}).buf.Bytes()},
		{"hash is a float", newEnc().v(arr{1.0, arr{arr{"BlockRemoved", arr{1.5}}}}).buf.Bytes()},
		{"empty digest", newEnc().v(arr{1.0, arr{arr{"BlockRemoved", arr{""}}}}).buf.Bytes()},
		{"negative token", newEnc().v(arr{1.0, arr{arr{"BlockStored", arr{}, nil, arr{-1}}}}).buf.Bytes()},
		{"huge token", newEnc().v(arr{1.0, arr{arr{"BlockStored", arr{}, nil, arr{uint64(1 << 40)}}}}).buf.Bytes()},
		{"negative block size", newEnc().v(arr{1.0, arr{arr{"BlockStored", arr{}, nil, arr{}, -4}}}).buf.Bytes()},
		{"truncated", newEnc().v(arr{1.0, arr{arr{"BlockRemoved", arr{1, 2, 3}}}}).buf.Bytes()[:20]},
		{"trailing bytes", append(newEnc().v(arr{1.0, arr{}}).buf.Bytes(), 0)},
		{"array longer than input", []byte{0xdd, 0xff, 0xff, 0xff, 0xff}},
		{"reserved type byte", []byte{0x92, 0xc1, 0x90}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := DecodeBatch(tc.data); !errors.Is(err, ErrMalformed) {
				t.Fatalf("err = %v, want ErrMalformed", err)
			}
		})
	}
}

// TestDecodeNesting checks that skipping deeply nested unknown values is
// bounded instead of recursing without limit.
func TestDecodeNesting(t *testing.T) {
	t.Parallel()
	data := []byte{0x94, 0x01, 0x90, 0xc0} // [1, [], nil, [[[...[1]...]]]]
	for range 10000 {
		data = append(data, 0x91)
	}
	data = append(data, 0x01)
	if _, err := DecodeBatch(data); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
}

// TestDecoderReuse checks that a reused Decoder gives the same results as
// a fresh one, whatever it decoded before.
func TestDecoderReuse(t *testing.T) {
	t.Parallel()
	var d Decoder
	var b Batch
	for range 2 {
		for _, g := range goldens() {
			data, err := os.ReadFile(filepath.Join("testdata", g.file))
			if err != nil {
				t.Fatal(err)
			}
			if err := d.Decode(data, &b); err != nil {
				t.Fatal(err)
			}
			if len(b.Events) != len(g.want.Events) || b.Skipped != g.want.Skipped {
				t.Fatalf("%s: %+v", g.file, b)
			}
			for i, e := range b.Events {
				w := g.want.Events[i]
				if e.Kind != w.Kind || len(e.Stored.Hashes) != len(w.Stored.Hashes) || len(e.Stored.TokenIDs) != len(w.Stored.TokenIDs) {
					t.Fatalf("%s event %d: %+v, want %+v", g.file, i, e, w)
				}
			}
		}
	}
}

// FuzzDecodeBatch: no input may panic or hang the decoder, and a decoded
// batch must be internally consistent.
func FuzzDecodeBatch(f *testing.F) {
	for _, g := range goldens() {
		data, err := os.ReadFile(filepath.Join("testdata", g.file))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x90})
	var d Decoder
	var b Batch
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := d.Decode(data, &b); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		for _, e := range b.Events {
			switch e.Kind {
			case KindStored, KindRemoved, KindCleared:
			default:
				t.Fatalf("event of kind %v", e.Kind)
			}
			if !e.Stored.Tier.Valid() || !e.Removed.Tier.Valid() {
				t.Fatalf("bad tier in %+v", e)
			}
		}
	})
}
