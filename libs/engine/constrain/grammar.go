package constrain

import (
	"sync"
)

// kind is what a grammar node generates.
type kind uint8

const (
	kNever   kind = iota // nothing (a false schema, pruned at compile time)
	kUnion               // any of alts (anyOf, type arrays, the any value)
	kObject              // an object of the listed properties, in order
	kMap                 // an object of any keys whose values are val
	kArray               // an array of val, minItems..maxItems long
	kString              // a string, minLen..maxLen code points
	kNumber              // a JSON number, an integer if integer, bounded if bounded
	kLiteral             // one of a set of JSON texts (enum, const, true, null), a trie
)

// node is one compiled (sub)schema. Nodes reference each other by index,
// so recursive schemas are cycles in the node graph.
type node struct {
	kind  kind
	alts  []int32 // kUnion, flattened: no alt is a union
	props []prop  // kObject
	// firstReq[i] is the first required property at or after i (len(props)
	// when none) and keyRoot[i] the trie of the keys that may come next when
	// property i is the first not yet considered: i..firstReq[i].
	firstReq []int32
	keyRoot  []int32
	val      int32 // kMap values, kArray items
	min, max int32 // kArray items, kString code points; max < 0: unbounded
	integer  bool  // kNumber
	bounded  bool  // kNumber: lo..hi hold, scaled by 10^scale
	scale    uint8
	lo, hi   int64
	lit      int32 // kLiteral trie root
}

// prop is one object property: its key as the JSON text it is emitted as.
type prop struct {
	name     string
	key      []byte
	val      int32
	required bool
}

// lnode is a node of a literal trie (enum values, keys). A trie's nodes are
// contiguous and children come after their parent.
type lnode struct {
	edges    []ledge
	terminal bool  // a complete literal ends here
	prop     int32 // key tries: the property whose key ends here, else -1
	owner    int32 // key tries: the object node, else -1
}

type ledge struct {
	b     byte
	child int32
}

func (n *lnode) next(b byte) int32 {
	for _, e := range n.edges {
		if e.b == b {
			return e.child
		}
	}
	return -1
}

// Grammar is a compiled JSON grammar: JSONObject or a schema. It is
// immutable and safe to share between goroutines and requests; each
// generation gets its own Matcher.
type Grammar struct {
	nodes []node
	lits  []lnode
	root  int32
	// keyStr is the unconstrained string node kMap keys use.
	keyStr int32
	// first[n] is the set of bytes a value of non-union node n can start
	// with.
	first [][4]uint64

	mu    sync.Mutex
	costs map[*Vocab]*costs // per-vocabulary completion costs, see costs.go
}

func (g *Grammar) add(n node) int32 {
	g.nodes = append(g.nodes, n)
	return int32(len(g.nodes) - 1)
}

// addLiterals adds a trie of texts and returns its root.
func (g *Grammar) addLiterals(texts [][]byte) int32 {
	root := int32(len(g.lits))
	g.lits = append(g.lits, lnode{prop: -1, owner: -1})
	for _, t := range texts {
		g.insert(root, t, -1, -1)
	}
	return root
}

// insert adds text under root, marking its end with prop of object owner.
func (g *Grammar) insert(root int32, text []byte, prop, owner int32) {
	cur := root
	for _, b := range text {
		nx := g.lits[cur].next(b)
		if nx < 0 {
			nx = int32(len(g.lits))
			g.lits = append(g.lits, lnode{prop: -1, owner: -1})
			g.lits[cur].edges = append(g.lits[cur].edges, ledge{b: b, child: nx})
		}
		cur = nx
	}
	g.lits[cur].terminal = true
	if prop >= 0 {
		g.lits[cur].prop, g.lits[cur].owner = prop, owner
	}
}

// The depth cap and the any value.
const (
	// MaxDepth caps the nesting of objects and arrays in an output (the
	// outermost object is depth 1). JSONObject's values nest at most this
	// deep; a schema whose smallest instance nests deeper does not compile,
	// and a recursive one stops recursing at it.
	MaxDepth = 32
)

// addAny adds the node of any JSON value (objects and arrays of any values,
// nesting capped by MaxDepth) and returns it and its object node.
func (g *Grammar) addAny() (anyVal, obj int32) {
	anyVal = g.add(node{kind: kUnion})
	obj = g.add(node{kind: kMap, val: anyVal})
	arr := g.add(node{kind: kArray, val: anyVal, max: -1})
	str := g.add(node{kind: kString, max: -1})
	num := g.add(node{kind: kNumber})
	lit := g.add(node{kind: kLiteral, lit: g.addLiterals([][]byte{[]byte("true"), []byte("false"), []byte("null")})})
	g.nodes[anyVal].alts = []int32{obj, arr, str, num, lit}
	return anyVal, obj
}

// JSONObject returns the grammar of any JSON object, OpenAI's
// response_format json_object: keys and values unconstrained, nesting at
// most MaxDepth.
func JSONObject() *Grammar {
	g := &Grammar{}
	_, g.root = g.addAny()
	g.keyStr = g.add(node{kind: kString, max: -1})
	g.finish()
	return g
}

// finish computes what the matcher looks up: first-byte sets.
func (g *Grammar) finish() {
	g.first = make([][4]uint64, len(g.nodes))
	for i := range g.nodes {
		g.first[i] = g.firstSet(int32(i))
	}
}

func (g *Grammar) firstSet(i int32) [4]uint64 {
	var s [4]uint64
	set := func(b byte) { s[b>>6] |= 1 << (b & 63) }
	n := &g.nodes[i]
	switch n.kind {
	case kObject, kMap:
		set('{')
	case kArray:
		set('[')
	case kString:
		set('"')
	case kNumber:
		set('-')
		for c := byte('0'); c <= '9'; c++ {
			set(c)
		}
	case kLiteral:
		for _, e := range g.lits[n.lit].edges {
			set(e.b)
		}
	case kUnion:
		for _, a := range n.alts {
			f := g.firstSet(a)
			for w := range s {
				s[w] |= f[w]
			}
		}
	}
	return s
}

func inSet(s *[4]uint64, b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }

// Matcher returns a matcher for one generation over v, positioned before
// the first token.
func (g *Grammar) Matcher(v *Vocab) *Matcher {
	return newMatcher(g, v, g.costsFor(v))
}

// MinTokens is the number of tokens the cheapest complete value takes over
// v, one token a character (an upper bound on the true minimum: pieces of
// several characters can only shorten it). A max_tokens of at least this
// always ends with a complete value; below it, the output is cut short.
func (g *Grammar) MinTokens(v *Vocab) int {
	return int(g.costsFor(v).minVal[g.root])
}
