package tokenizer

import (
	"cmp"
	"slices"
)

// Special tokens (control, user-defined and unknown ones) are cut out of
// the text before it is tokenized, as llama.cpp's tokenizer_st_partition
// does: the longest token first (lower id first among equals), each
// taking all its non-overlapping occurrences, leftmost first, in the text
// the ones before it left. Without parse_special only user-defined tokens
// take part. A token marked lstrip or rstrip also swallows the ASCII
// whitespace beside it.
//
// llama.cpp searches the text once per special token; here one scan of a
// trie of all of them finds every occurrence, and the occurrences are
// then granted in the same order, so the cost follows the text and the
// occurrences, not the text times the number of special tokens.

// fragment is a piece of the text: raw text [start, end) or, with id set,
// one special token.
type fragment struct {
	start, end int
	id         uint32
}

// occurrence is a special token found at [start, end); rank orders
// tokens (0 first).
type occurrence struct {
	rank       int32
	start, end int32
}

type trieNode struct {
	edges []trieEdge
	// rank of the token spelled by the path to this node, among all
	// special tokens and among the user-defined ones; -1 for none.
	all, plain int32
}

type trieEdge struct {
	b    byte
	node int32
}

// specialMatcher finds special tokens in text.
type specialMatcher struct {
	root   [256]int32
	nodes  []trieNode
	ids    []uint32 // by rank
	strip  []uint8  // attrLStrip|attrRStrip by rank
	nplain int      // user-defined tokens: 0 means plain encoding has nothing to find
}

func newSpecialMatcher(tokens []string, attrs []uint8) *specialMatcher {
	m := &specialMatcher{}
	for i := range m.root {
		m.root[i] = -1
	}
	for id, s := range tokens {
		if s != "" && attrs[id]&(attrControl|attrUserDefined|attrUnknown) != 0 {
			m.ids = append(m.ids, uint32(id))
		}
	}
	slices.SortStableFunc(m.ids, func(a, b uint32) int {
		return cmp.Compare(len(tokens[b]), len(tokens[a]))
	})
	m.strip = make([]uint8, len(m.ids))
	for rank, id := range m.ids {
		m.strip[rank] = attrs[id] & (attrLStrip | attrRStrip)
		plain := attrs[id]&(attrControl|attrUnknown) == 0
		if plain {
			m.nplain++
		}
		m.insert(tokens[id], int32(rank), plain)
	}
	return m
}

func (m *specialMatcher) insert(s string, rank int32, plain bool) {
	node := m.root[s[0]]
	if node < 0 {
		node = m.newNode()
		m.root[s[0]] = node
	}
	for i := 1; i < len(s); i++ {
		next := m.child(node, s[i])
		if next < 0 {
			next = m.newNode()
			m.nodes[node].edges = append(m.nodes[node].edges, trieEdge{b: s[i], node: next})
		}
		node = next
	}
	n := &m.nodes[node]
	if n.all < 0 {
		n.all = rank // ranks arrive in order: the first is the best
	}
	if plain && n.plain < 0 {
		n.plain = rank
	}
}

func (m *specialMatcher) newNode() int32 {
	m.nodes = append(m.nodes, trieNode{all: -1, plain: -1})
	return int32(len(m.nodes) - 1)
}

func (m *specialMatcher) child(node int32, b byte) int32 {
	for _, e := range m.nodes[node].edges {
		if e.b == b {
			return e.node
		}
	}
	return -1
}

// partition cuts text into raw fragments and special tokens.
func (m *specialMatcher) partition(s *scratch, text string, special bool) []fragment {
	frags := s.frags[:0]
	if text == "" {
		return frags
	}
	if len(m.ids) == 0 || (!special && m.nplain == 0) {
		return append(frags, fragment{start: 0, end: len(text), id: NoToken})
	}
	occ := m.find(s.occ[:0], text, special)
	s.occ = occ
	if len(occ) == 0 {
		return append(frags, fragment{start: 0, end: len(text), id: NoToken})
	}
	slices.SortFunc(occ, func(a, b occurrence) int {
		if c := cmp.Compare(a.rank, b.rank); c != 0 {
			return c
		}
		return cmp.Compare(a.start, b.start)
	})
	// claim[i]: 0 free text, 1 inside a granted token, 2 stripped space.
	claim := slices.Grow(s.claim[:0], len(text))[:len(text)]
	clear(claim)
	s.claim = claim
	granted := occ[:0] // reuses occ: each write lags its read
	for _, o := range occ {
		if slices.ContainsFunc(claim[o.start:o.end], func(c uint8) bool { return c != 0 }) {
			continue
		}
		for i := o.start; i < o.end; i++ {
			claim[i] = 1
		}
		if m.strip[o.rank]&attrLStrip != 0 {
			for i := o.start - 1; i >= 0 && claim[i] == 0 && isCSpace(text[i]); i-- {
				claim[i] = 2
			}
		}
		if m.strip[o.rank]&attrRStrip != 0 {
			for i := o.end; int(i) < len(text) && claim[i] == 0 && isCSpace(text[i]); i++ {
				claim[i] = 2
			}
		}
		granted = append(granted, o)
	}
	slices.SortFunc(granted, func(a, b occurrence) int { return cmp.Compare(a.start, b.start) })
	raw := func(frags []fragment, from, to int) []fragment {
		for i := from; i < to; {
			if claim[i] != 0 {
				i++
				continue
			}
			j := i
			for j < to && claim[j] == 0 {
				j++
			}
			frags = append(frags, fragment{start: i, end: j, id: NoToken})
			i = j
		}
		return frags
	}
	at := 0
	for _, g := range granted {
		frags = raw(frags, at, int(g.start))
		frags = append(frags, fragment{start: int(g.start), end: int(g.end), id: m.ids[g.rank]})
		at = int(g.end)
	}
	return raw(frags, at, len(text))
}

// find appends every occurrence of every special token taking part.
func (m *specialMatcher) find(occ []occurrence, text string, special bool) []occurrence {
	for i := range len(text) {
		node := m.root[text[i]]
		for j := i + 1; node >= 0; j++ {
			n := &m.nodes[node]
			rank := n.plain
			if special {
				rank = n.all
			}
			if rank >= 0 {
				occ = append(occ, occurrence{rank: rank, start: int32(i), end: int32(j)})
			}
			if j == len(text) {
				break
			}
			node = m.child(node, text[j])
		}
	}
	return occ
}

// isCSpace is C's isspace in the "C" locale, which llama.cpp strips with.
func isCSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}
