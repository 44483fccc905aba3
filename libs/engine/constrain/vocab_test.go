package constrain

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
)

// The engine holds a Matcher as this interface.
var _ interface {
	Mask(logits []float32, left int)
	Accept(tok uint32) error
} = (*Matcher)(nil)

// TestVocabTrie checks the flattened trie against the pieces: every token
// is reachable by its piece, subtree ends are consistent, and duplicate
// pieces, control tokens and EOS are handled.
func TestVocabTrie(t *testing.T) {
	t.Parallel()
	pieces := [][]byte{nil, []byte("a"), []byte("ab"), []byte("abc"), []byte("b"), []byte("ab"), []byte("</s>"), []byte("ba"), nil}
	v := NewVocab(pieces, []uint32{6, 99})
	if !v.IsEOS(6) || v.IsEOS(2) || v.IsEOS(99) {
		t.Fatal("EOS ids wrong")
	}
	found := map[uint32]bool{}
	var path []byte
	for i, n := range v.all.nodes {
		path = append(path[:n.depth-1], n.b)
		if int(n.end) <= i || int(n.end) > len(v.all.nodes) {
			t.Fatalf("node %d: end %d", i, n.end)
		}
		if n.tok0 < 0 {
			continue
		}
		for _, id := range v.all.toks[n.tok0:n.tok1] {
			if !bytes.Equal(v.Piece(id), path) {
				t.Errorf("token %d (%q) at path %q", id, v.Piece(id), path)
			}
			found[id] = true
		}
	}
	for _, id := range []uint32{1, 2, 3, 4, 5, 7} {
		if !found[id] {
			t.Errorf("token %d missing from the trie", id)
		}
	}
	if found[0] || found[6] || found[8] {
		t.Error("an empty piece or EOS in the trie")
	}
}

// TestMaskShapes: logits past the vocabulary are masked, a shorter slice
// is masked as far as it goes, control tokens are never allowed, and EOS
// only at the end.
func TestMaskShapes(t *testing.T) {
	t.Parallel()
	v := byteVocab()
	m := JSONObject().Matcher(v)
	logits := make([]float32, v.Size()+10)
	m.Mask(logits, 100)
	for id, l := range logits {
		want := id == '{' || id == ' ' || id == '\n' || id == '\r' || id == '\t'
		if allowed := !math.IsInf(float64(l), -1); allowed != want {
			t.Errorf("token %d allowed %v, want %v", id, allowed, want)
		}
	}
	short := make([]float32, 50)
	m.Mask(short, 100)
	for _, c := range []byte("{}") {
		if err := m.Accept(uint32(c)); err != nil {
			t.Fatal(err)
		}
	}
	clear(logits)
	m.Mask(logits, 0)
	for id, l := range logits {
		if allowed := !math.IsInf(float64(l), -1); allowed != (id == byteEOS) {
			t.Errorf("after {}: token %d allowed %v", id, allowed)
		}
	}
}

// TestMissingCharacters runs on a vocabulary with no single-byte tokens
// for the closing brace and quote, only pieces that contain them: the
// matcher must still steer every walk to a complete object.
func TestMissingCharacters(t *testing.T) {
	t.Parallel()
	var pieces [][]byte
	pieces = append(pieces, nil)
	for b := 0x20; b < 0x7f; b++ {
		if b != '}' && b != '"' {
			pieces = append(pieces, []byte{byte(b)})
		}
	}
	pieces = append(pieces, []byte(`"}`), []byte(`a"`), []byte(`{"`), []byte(`":`), []byte(`1}`))
	v := NewVocab(pieces, []uint32{0})
	g, err := CompileSchema([]byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for seed := range 20 {
		out, done := walk(t, g.Matcher(v), v, 60, rand.New(rand.NewPCG(uint64(seed), 0)))
		if !done || conforms(reference(t, `{"properties":{"a":{"type":"integer"}},"required":["a"]}`), out) != nil {
			t.Fatalf("seed %d: %q (done %v)", seed, out, done)
		}
	}
}
