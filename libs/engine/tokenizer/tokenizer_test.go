package tokenizer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"runtime"
	"testing"

	"switchyard.dev/libs/sharedtest"
)

// buildBPE writes a tokenizer.bin image for the given pieces and scores.
func buildBPE(pieces []string, scores []float32) []byte {
	var b bytes.Buffer
	maxLen := 0
	for _, p := range pieces {
		maxLen = max(maxLen, len(p))
	}
	_ = binary.Write(&b, binary.LittleEndian, int32(maxLen))
	for i, p := range pieces {
		_ = binary.Write(&b, binary.LittleEndian, math.Float32bits(scores[i]))
		_ = binary.Write(&b, binary.LittleEndian, int32(len(p)))
		b.WriteString(p)
	}
	return b.Bytes()
}

// miniVocab mimics tok512's layout: control tokens, 256 byte fallbacks,
// then merges.
func miniVocab() ([]string, []float32) {
	pieces := []string{"<unk>", "<s>", "</s>"}
	scores := []float32{0, 0, 0}
	for b := range 256 {
		pieces = append(pieces, "<0x"+string("0123456789ABCDEF"[b>>4])+string("0123456789ABCDEF"[b&15])+">")
		scores = append(scores, 0)
	}
	for i, p := range []string{" ", "a", "b", "ab", " ab", "c", "é"} {
		pieces = append(pieces, p)
		scores = append(scores, float32(-i))
	}
	return pieces, scores
}

func TestBPEEncode(t *testing.T) {
	t.Parallel()
	pieces, scores := miniVocab()
	tok, err := ParseBPE(buildBPE(pieces, scores), len(pieces))
	if err != nil {
		t.Fatal(err)
	}
	id := func(s string) uint32 { return tok.index[s] }
	tests := []struct {
		name     string
		text     string
		bos, eos bool
		want     []uint32
	}{
		{"empty", "", true, false, []uint32{BOS}},
		{"merge", "ab", true, false, []uint32{BOS, id(" ab")}},
		{"fallback", "x", false, true, []uint32{id(" "), 'x' + ByteOffset, EOS}},
		{"utf8 known", "é", false, false, []uint32{id(" "), id("é")}},
		{"utf8 fallback", "ü", false, false, []uint32{id(" "), 0xC3 + ByteOffset, 0xBC + ByteOffset}},
		{"mixed", "abc", false, false, []uint32{id(" ab"), id("c")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := tok.Encode(tc.text, tc.bos, tc.eos)
			if !equal(got, tc.want) {
				t.Fatalf("Encode(%q) = %v, want %v", tc.text, got, tc.want)
			}
		})
	}
}

func TestBPEPiece(t *testing.T) {
	t.Parallel()
	pieces, scores := miniVocab()
	tok, err := ParseBPE(buildBPE(pieces, scores), len(pieces))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(tok.Piece(BOS, tok.index[" ab"])); got != "ab" {
		t.Errorf("after BOS got %q, want leading space stripped", got)
	}
	if got := string(tok.Piece(5, tok.index[" ab"])); got != " ab" {
		t.Errorf("got %q, want %q", got, " ab")
	}
	if got := tok.Piece(5, 0x41+ByteOffset); string(got) != "A" {
		t.Errorf("raw byte piece = %q", got)
	}
	if got := tok.Piece(5, 9999); got != nil {
		t.Errorf("out of range piece = %q", got)
	}
}

func TestStoriesTokenizer(t *testing.T) {
	t.Parallel()
	dir := sharedtest.Path(t, sharedtest.Stories260K)
	tok, err := LoadBPEFile(filepath.Join(dir, "tok512.bin"), 512)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"Once upon a time", "Hello, world! 123", "naïve 日本 🙂", "a  b\n\tc"} {
		ids := tok.Encode(text, true, false)
		if ids[0] != BOS {
			t.Fatalf("no BOS in %v", ids)
		}
		got := string(Decode(tok, BOS, ids[1:]))
		if got != text {
			t.Errorf("round trip %q -> %v -> %q", text, ids, got)
		}
	}
}

func TestParseBPEErrors(t *testing.T) {
	t.Parallel()
	pieces, scores := miniVocab()
	good := buildBPE(pieces, scores)
	tests := []struct {
		name  string
		data  []byte
		vocab int
	}{
		{"empty", nil, 10},
		{"truncated", good[:len(good)-3], len(pieces)},
		{"too many entries", good, len(pieces) + 1},
		{"entries left over (a larger vocabulary's file)", good, len(pieces) - 1},
		{"bad vocab", good, 0},
		{"negative length", append(append([]byte{}, good[:4]...), 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff), 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := ParseBPE(tc.data, tc.vocab); !errors.Is(err, ErrFormat) {
				t.Fatalf("err = %v, want ErrFormat", err)
			}
		})
	}
}

func TestBytes(t *testing.T) {
	t.Parallel()
	if _, err := NewBytes(100); err == nil {
		t.Fatal("want error for tiny vocab")
	}
	b, err := NewBytes(512)
	if err != nil {
		t.Fatal(err)
	}
	ids := b.Encode("hé", true, true)
	if ids[0] != BOS || ids[len(ids)-1] != EOS || len(ids) != 5 {
		t.Fatalf("ids %v", ids)
	}
	if got := string(Decode(b, BOS, ids)); got != "hé" {
		t.Fatalf("decode = %q", got)
	}
}

func TestValidUTF8Prefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
	}{
		{"", 0}, {"abc", 3}, {"a\xc3", 1}, {"a\xc3\xa9", 3}, {"\xf0\x9f\x99", 0}, {"\xf0\x9f\x99\x82", 4}, {"\xff", 1},
	}
	for _, tc := range tests {
		if got := ValidUTF8Prefix([]byte(tc.in)); got != tc.want {
			t.Errorf("ValidUTF8Prefix(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// The header's max_token_length comes from the file: a huge one must not
// size an allocation (run.c's buffer is 2*max_token_length+3 bytes; with
// 2^31-1 each Encode allocated 4 GiB and a fuzzing process died of it).
func TestHeaderMaxLengthSizesNothing(t *testing.T) {
	pieces, scores := miniVocab()
	data := buildBPE(pieces, scores)
	binary.LittleEndian.PutUint32(data, math.MaxInt32)
	tok, err := ParseBPE(data, len(pieces))
	if err != nil {
		t.Fatal(err)
	}
	want := tok.Encode("ab c ab", true, false) // warm up, and the answer
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got := tok.Encode("ab c ab", true, false)
	runtime.ReadMemStats(&after)
	if !equal(got, want) {
		t.Fatalf("encode %v, then %v", want, got)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("one short Encode allocated %d bytes", n)
	}
}

func FuzzParseBPE(f *testing.F) {
	pieces, scores := miniVocab()
	f.Add(buildBPE(pieces, scores), len(pieces))
	f.Add([]byte{0, 0, 0, 0}, 1)
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 'a'}, 1)
	f.Fuzz(func(t *testing.T, data []byte, vocab int) {
		tok, err := ParseBPE(data, vocab%4096)
		if err != nil {
			return
		}
		text := "ab c\xc3\xa9"
		ids := tok.Encode(text, true, true)
		for _, id := range ids {
			if int(id) >= tok.VocabSize() && id >= ByteOffset+256 {
				t.Fatalf("id %d out of vocab %d", id, tok.VocabSize())
			}
			_ = tok.Piece(BOS, id)
		}
	})
}

func FuzzBPERoundTrip(f *testing.F) {
	f.Add("Once upon a time")
	f.Add("日本\x00\xff")
	pieces, scores := miniVocab()
	tok, err := ParseBPE(buildBPE(pieces, scores), len(pieces))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		ids := tok.Encode(text, true, false)
		if got := string(Decode(tok, BOS, ids[1:])); got != text {
			t.Fatalf("round trip %q -> %q", text, got)
		}
	})
}

func equal(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func BenchmarkEncode(b *testing.B) {
	pieces, scores := miniVocab()
	tok, _ := ParseBPE(buildBPE(pieces, scores), len(pieces))
	for b.Loop() {
		tok.Encode("ab ab abc ab c ab ab abab ab", true, false)
	}
}
