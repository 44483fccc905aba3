package constrain

import (
	"bytes"
	"slices"
	"unicode/utf8"
)

// Vocab is a model's vocabulary as the bytes each token emits mid-text,
// indexed for masking: a byte trie of the pieces, flattened in preorder so
// that a mask walk is one forward scan that skips a rejected prefix's whole
// subtree. Build it once per model; it is immutable and safe for concurrent
// use.
type Vocab struct {
	pieces [][]byte
	isEOS  []bool
	eos    []uint32
	all    trie // every piece
	// The string fast path: inside a string, a plain piece (complete UTF-8
	// characters, no quote, backslash or control byte) only adds its code
	// points, so Mask prices plain pieces in one loop and walks only the
	// trie of the rest.
	plain      []uint32
	plainRunes []int32
	rest       trie
	depth      int // the longest piece, in bytes
	// single[b] reports whether some token's piece is exactly the byte b:
	// the completion costs assume the cheapest way to finish a value is
	// one such token a character.
	single [256]bool
}

// trie is a piece trie flattened in preorder.
type trie struct {
	nodes []trieNode
	toks  []uint32 // token ids ending at nodes, grouped by node
}

// trieNode is a node of the flattened piece trie. Its children follow it
// directly; end is the index just past its subtree.
type trieNode struct {
	end        int32
	tok0, tok1 int32 // toks[tok0:tok1] end here
	depth      int32
	b          byte
}

// NewVocab indexes pieces (pieces[id] = the bytes token id emits) for
// masking. An empty piece is never allowed (control tokens); eos are the ids
// that end the generation, allowed exactly when the value is complete,
// whatever their pieces. Both slices are copied.
func NewVocab(pieces [][]byte, eos []uint32) *Vocab {
	v := &Vocab{
		pieces: make([][]byte, len(pieces)),
		isEOS:  make([]bool, len(pieces)),
	}
	for _, id := range eos {
		if int(id) < len(pieces) && !v.isEOS[id] {
			v.isEOS[id] = true
			v.eos = append(v.eos, id)
		}
	}
	ids := make([]uint32, 0, len(pieces))
	var rest []uint32
	for id, p := range pieces {
		v.pieces[id] = bytes.Clone(p)
		if len(p) == 0 || v.isEOS[id] {
			continue
		}
		ids = append(ids, uint32(id))
		v.depth = max(v.depth, len(p))
		if len(p) == 1 {
			v.single[p[0]] = true
		}
		if plainString(p) {
			v.plain = append(v.plain, uint32(id))
			v.plainRunes = append(v.plainRunes, int32(utf8.RuneCount(p)))
		} else {
			rest = append(rest, uint32(id))
		}
	}
	v.all = v.build(ids)
	v.rest = v.build(rest)
	return v
}

// plainString reports whether p, inside a JSON string, is nothing but
// whole characters that need no escape.
func plainString(p []byte) bool {
	for _, b := range p {
		if b < 0x20 || b == '"' || b == '\\' {
			return false
		}
	}
	return utf8.Valid(p)
}

// build lays the pieces of ids out as a preorder trie: walking them in
// sorted order, each piece shares its prefix with the path of the
// previous one.
func (v *Vocab) build(ids []uint32) trie {
	ids = slices.Clone(ids)
	slices.SortStableFunc(ids, func(a, b uint32) int { return bytes.Compare(v.pieces[a], v.pieces[b]) })
	var t trie
	var path []int32 // path[d] = node index at depth d+1 on the current path
	var last []byte
	for _, id := range ids {
		p := v.pieces[id]
		common := 0
		for common < len(p) && common < len(last) && p[common] == last[common] {
			common++
		}
		for d := len(path) - 1; d >= common; d-- {
			t.nodes[path[d]].end = int32(len(t.nodes))
		}
		path = path[:common]
		for d := common; d < len(p); d++ {
			path = append(path, int32(len(t.nodes)))
			t.nodes = append(t.nodes, trieNode{b: p[d], depth: int32(d + 1), tok0: -1})
		}
		n := &t.nodes[path[len(p)-1]]
		if n.tok0 < 0 {
			n.tok0 = int32(len(t.toks))
		}
		t.toks = append(t.toks, id)
		n.tok1 = int32(len(t.toks))
		last = p
	}
	for _, i := range path {
		t.nodes[i].end = int32(len(t.nodes))
	}
	return t
}

// Size is the number of token ids.
func (v *Vocab) Size() int { return len(v.pieces) }

// Piece returns the bytes token id emits (nil for control and unknown ids).
func (v *Vocab) Piece(id uint32) []byte {
	if int(id) >= len(v.pieces) {
		return nil
	}
	return v.pieces[id]
}

// IsEOS reports whether id ends the generation.
func (v *Vocab) IsEOS(id uint32) bool { return int(id) < len(v.isEOS) && v.isEOS[id] }
