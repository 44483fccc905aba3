package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"switchyard.dev/libs/engine/tokenizer"
)

// allTypes has a metadata value of every GGUF type, arrays of each, empty
// arrays and arrays of arrays.
var allTypes = []KV{
	{"u8", uint8(200)}, {"i8", int8(-100)}, {"u16", uint16(60000)}, {"i16", int16(-30000)},
	{"u32", uint32(4e9)}, {"i32", int32(-2e9)}, {"f32", float32(1.5)}, {"t", true}, {"f", false},
	{"s", "héllo"}, {"empty", ""}, {"u64", uint64(math.MaxUint64)}, {"i64", int64(math.MinInt64)}, {"f64", math.Pi},
	{"a.u8", []uint8{1, 2, 255}}, {"a.i8", []int8{-1, 1}}, {"a.u16", []uint16{1, 65535}}, {"a.i16", []int16{-2}},
	{"a.u32", []uint32{7}}, {"a.i32", []int32{-7, 7}}, {"a.f32", []float32{0.25, -1}}, {"a.bool", []bool{true, false, true}},
	{"a.s", []string{"a", "", "ü"}}, {"a.u64", []uint64{1 << 40}}, {"a.i64", []int64{-1 << 40}}, {"a.f64", []float64{1e300}},
	{"a.empty", []string{}},
	{"a.nested", []any{[]uint32{1, 2}, []string{"x"}, []any{[]int8{-1}}, []float32{}}},
	{"general.alignment", uint32(64)},
}

func writeFile(t testing.TB, kvs []KV, tensors []Tensor) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, kvs, tensors); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestReadMetadataRoundTrip(t *testing.T) {
	t.Parallel()
	tensors := []Tensor{
		{Name: "a", Dims: []uint64{3}, Data: make([]byte, 12)},
		{Name: "b", Dims: []uint64{2, 5}, Data: make([]byte, 40)},
	}
	// The writer aligns to 32; a file that says 64 must still have its
	// offsets on 64, so the round trip uses the default here and 64 in
	// TestReadMetadataErrors.
	kvs := allTypes[:len(allTypes)-1]
	file := writeFile(t, kvs, tensors)
	md, err := ReadMetadata(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if md.Version != Version || md.Alignment != Alignment {
		t.Errorf("version %d alignment %d", md.Version, md.Alignment)
	}
	if !reflect.DeepEqual(md.KVs, kvs) {
		t.Errorf("KVs differ:\n got %#v\nwant %#v", md.KVs, kvs)
	}
	want := []TensorInfo{{Name: "a", Dims: []uint64{3}, Type: TensorF32, Offset: 0}, {Name: "b", Dims: []uint64{2, 5}, Type: TensorF32, Offset: 32}}
	if !reflect.DeepEqual(md.Tensors, want) {
		t.Errorf("tensors %+v, want %+v", md.Tensors, want)
	}
	if md.DataOffset%Alignment != 0 || md.DataOffset+32+40 != uint64(len(file))-24 {
		t.Errorf("data offset %d in a file of %d bytes", md.DataOffset, len(file))
	}
	if v, ok := md.Get("s"); !ok || v != "héllo" {
		t.Errorf("Get(s) = %v, %v", v, ok)
	}
	if _, ok := md.Get("missing"); ok {
		t.Error("Get(missing) found it")
	}
}

// TestReadMetadataTruncated: every cut of a header is an error naming the
// truncation, never a panic or a short read taken for the whole.
func TestReadMetadataTruncated(t *testing.T) {
	t.Parallel()
	file := writeFile(t, allTypes[:len(allTypes)-1], []Tensor{{Name: "a", Dims: []uint64{1}, Data: make([]byte, 4)}})
	md, err := ReadMetadata(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	for n := range int(md.DataOffset) - 32 { // the last bytes are padding
		_, err := ReadMetadata(bytes.NewReader(file[:n]))
		if !errors.Is(err, ErrFormat) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("cut at %d: %v", n, err)
		}
	}
}

// header builds raw GGUF bytes for the error cases.
type header struct{ bytes.Buffer }

func (h *header) u32(v uint32) *header { _ = binary.Write(h, binary.LittleEndian, v); return h }
func (h *header) u64(v uint64) *header { _ = binary.Write(h, binary.LittleEndian, v); return h }
func (h *header) str(s string) *header { h.u64(uint64(len(s))); h.WriteString(s); return h }

func start(tensors, kvs uint64) *header {
	h := &header{}
	return h.u32(magic).u32(3).u64(tensors).u64(kvs)
}

func TestReadMetadataErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		file    []byte
		mention string
	}{
		{"empty", nil, "truncated"},
		{"bad magic", (&header{}).u32(0x12345678).u32(3).Bytes(), "magic"},
		{"big-endian", (&header{}).u32(0x47475546).u32(3).Bytes(), "big-endian"},
		{"version 1", (&header{}).u32(magic).u32(1).Bytes(), "version 1"},
		{"version 4", (&header{}).u32(magic).u32(4).Bytes(), "version 4"},
		{"too many entries", start(0, 1<<40).Bytes(), "metadata entries"},
		{"too many tensors", start(1<<40, 0).Bytes(), "tensors"},
		{"huge string", start(0, 1).u64(1 << 40).Bytes(), "string of"},
		{"unknown type", start(0, 1).str("k").u32(99).Bytes(), "unknown value type 99"},
		{"array of unknown type", start(0, 1).str("k").u32(9).u32(77).u64(1).Bytes(), "array of unknown value type 77"},
		{"huge array", start(0, 1).str("k").u32(9).u32(0).u64(1 << 40).Bytes(), "array of"},
		{"truncated array", start(0, 1).str("tokens").u32(9).u32(8).u64(3).str("a").Bytes(), `key "tokens": entry 1 of 3`},
		{"deep nesting", func() []byte {
			h := start(0, 1).str("k").u32(9)
			for range 20 {
				h.u32(9).u64(1)
			}
			return h.Bytes()
		}(), "nested deeper"},
		{"no dimensions", start(1, 0).str("t").u32(0).Bytes(), "0 dimensions"},
		{"five dimensions", start(1, 0).str("t").u32(5).Bytes(), "5 dimensions"},
		{"dimension overflow", start(1, 0).str("t").u32(2).u64(1 << 40).u64(1 << 40).Bytes(), "overflow"},
		{"bad alignment", start(0, 1).str("general.alignment").u32(4).u32(24).Bytes(), "general.alignment"},
		{"alignment of another type", start(0, 1).str("general.alignment").u32(8).str("32").Bytes(), "general.alignment"},
		{"misaligned tensor", start(1, 1).str("general.alignment").u32(4).u32(64).str("t").u32(1).u64(1).u32(0).u64(32).Bytes(), "not a multiple"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ReadMetadata(bytes.NewReader(tc.file))
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("err = %v, want ErrFormat mentioning %q", err, tc.mention)
			}
		})
	}
}

// TestReadMetadataBoundsClaims: a header claiming the largest array and
// string the reader accepts, with no data behind them, fails without
// allocating anything like the claim.
func TestReadMetadataBoundsClaims(t *testing.T) {
	for _, file := range [][]byte{
		start(0, 1).str("k").u32(9).u32(10).u64(maxArrayLen).Bytes(), // 2 GiB of uint64 claimed
		start(0, 1).str("k").u32(8).u64(maxString).Bytes(),
		start(0, 1).str("k").u32(9).u32(8).u64(maxArrayLen).Bytes(),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		if _, err := ReadMetadata(bytes.NewReader(file)); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("err = %v, want a truncation", err)
		}
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 8<<20 {
			t.Errorf("allocated %d bytes for a claim with no data", grew)
		}
	}
}

func TestVocabErrors(t *testing.T) {
	t.Parallel()
	base := []KV{{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.tokens", []string{"a", "b", "ab"}}, {"tokenizer.ggml.merges", []string{"a b"}}}
	with := func(kvs ...KV) []KV { return append(append([]KV{}, base...), kvs...) }
	tests := []struct {
		name    string
		kvs     []KV
		target  error
		mention string
	}{
		{"no model", base[1:], ErrFormat, "tokenizer.ggml.model"},
		{"bert", []KV{{"tokenizer.ggml.model", "bert"}, base[1]}, tokenizer.ErrUnsupported, `"bert"`},
		{"no tokens", []KV{base[0], base[2]}, ErrFormat, "tokenizer.ggml.tokens"},
		{"tokens of numbers", []KV{base[0], {"tokenizer.ggml.tokens", []uint32{1}}}, ErrFormat, "array of strings"},
		{"no merges", base[:2], ErrFormat, "merges"},
		{"short scores", with(KV{"tokenizer.ggml.scores", []float32{1}}), ErrFormat, "scores"},
		{"types of floats", with(KV{"tokenizer.ggml.token_type", []float32{1, 1, 1}}), ErrFormat, "token_type"},
		{"bool of another type", with(KV{"tokenizer.ggml.add_bos_token", uint32(1)}), ErrFormat, "add_bos_token"},
		{"id of another type", with(KV{"tokenizer.ggml.bos_token_id", "1"}), ErrFormat, "bos_token_id"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Vocab(Metadata{KVs: tc.kvs})
			if !errors.Is(err, tc.target) || !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("err = %v, want %v mentioning %q", err, tc.target, tc.mention)
			}
		})
	}
}

// TestVocabDefaults: llama.cpp's defaults and fix-ups.
func TestVocabDefaults(t *testing.T) {
	t.Parallel()
	spm, err := Vocab(Metadata{KVs: []KV{
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "", "<|im_end|>", "▁a"}},
		{"tokenizer.ggml.bos_token_id", uint32(99)}, // bad: the default stays
		{"general.name", "Phi-3 mini"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if spm.BOS != 1 || spm.EOS != 2 || spm.UNK != 0 || !spm.AddBOS || !spm.AddSpacePrefix {
		t.Errorf("SPM defaults: %+v", spm)
	}
	if spm.Tokens[3] != "[EMPTY_3]" {
		t.Errorf("empty token named %q", spm.Tokens[3])
	}
	if spm.Types[4] != tokenizer.TokenControl || spm.Types[2] != tokenizer.TokenControl {
		t.Errorf("end-of-generation markers typed %v, %v; want control", spm.Types[4], spm.Types[2])
	}
	if !slicesEqual(spm.RStrip, []uint32{2, 4}) {
		t.Errorf("Phi-3 rstrip %v, want </s> and <|im_end|>", spm.RStrip)
	}
	bpe, err := Vocab(Metadata{KVs: []KV{
		{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.pre", "llama-bpe"},
		{"tokenizer.ggml.tokens", []string{"a", "b", "ab", "<|fim_prefix|>", "<PRE>"}},
		{"tokenizer.ggml.merges", []string{"a b", "nospace", "x "}},
		{"tokenizer.ggml.add_space_prefix", true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if bpe.BOS != tokenizer.NoToken || !bpe.IgnoreMerges || !bpe.AddBOS || bpe.AddSpacePrefix || len(bpe.Merges) != 1 {
		t.Errorf("llama-bpe defaults: %+v", bpe)
	}
	if bpe.Types[3] != tokenizer.TokenControl || bpe.Types[4] != tokenizer.TokenNormal {
		t.Errorf("FIM prefix marker types %v %v: want only the first marker made control", bpe.Types[3], bpe.Types[4])
	}
}

func slicesEqual(a, b []uint32) bool { return reflect.DeepEqual(a, b) }

// FuzzReadMetadata: no input panics; what reads, writes back and reads
// the same; a vocabulary in it builds or fails cleanly.
func FuzzReadMetadata(f *testing.F) {
	f.Add(writeFile(f, allTypes[:len(allTypes)-1], []Tensor{{Name: "a", Dims: []uint64{1}, Data: make([]byte, 4)}}))
	f.Add(writeFile(f, []KV{
		{"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.pre", "qwen2"},
		{"tokenizer.ggml.tokens", []string{"a", "b", "ab", "<|im_end|>"}}, {"tokenizer.ggml.merges", []string{"a b"}},
		{"tokenizer.ggml.token_type", []int32{1, 1, 1, 3}},
	}, nil))
	f.Add(writeFile(f, []KV{
		{"tokenizer.ggml.model", "llama"}, {"tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "▁", "a", "▁a"}},
		{"tokenizer.ggml.scores", []float32{0, 0, 0, -1, -2, -3}}, {"tokenizer.ggml.token_type", []int32{2, 3, 3, 1, 1, 1}},
	}, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		md, err := ReadMetadata(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error not wrapping ErrFormat: %v", err)
			}
			return
		}
		var again bytes.Buffer
		if err := Write(&again, md.KVs, nil); err != nil {
			t.Fatalf("re-encoding what was read: %v", err)
		}
		md2, err := ReadMetadata(bytes.NewReader(again.Bytes()))
		if err != nil {
			t.Fatalf("re-reading: %v", err)
		}
		var third bytes.Buffer
		if err := Write(&third, md2.KVs, nil); err != nil || !bytes.Equal(third.Bytes(), again.Bytes()) {
			t.Fatalf("round trip is not stable (%v)", err)
		}
		if v, err := Vocab(md); err == nil {
			if tok, err := tokenizer.NewVocab(v); err == nil {
				tokenizer.Decode(tok, tok.BOS(), tok.EncodeSpecial(string(data[:min(len(data), 64)]), true, true))
			}
		}
	})
}
