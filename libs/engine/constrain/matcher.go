package constrain

import (
	"fmt"
	"math"
)

const (
	// MaxWhitespace caps a run of consecutive whitespace outside strings:
	// enough for pretty-printed output three levels deep, few enough that a
	// sampler cannot spin on spaces or newlines.
	MaxWhitespace = 8
	// MaxHeads caps the parses a matcher follows at once (anyOf
	// alternatives that share a prefix, such as tool calls that all start
	// {"name":"). Beyond it the later alternatives are dropped, which
	// narrows the output but never makes it invalid.
	MaxHeads = 128
)

// Frame positions. A matcher state is a stack of frames, innermost on top;
// the positions say where in its value each frame is.
const (
	pDocStart uint8 = iota // before the value (leading whitespace)
	pDocEnd                // after it: only EOS
	pObjStart              // after {
	pObjKey                // a = key trie node (kObject)
	pObjColon              // after the key; a = property (kObject)
	pObjValue              // after :
	pObjAfter              // after a value; b = next property (kObject)
	pObjComma              // after ,; b = next property (kObject)
	pArrStart              // after [
	pArrAfter              // after an item; a = items so far
	pArrComma              // after ,; a = items so far
	pStr                   // a = code points, b = escape | utf8<<4
	pLit                   // a = literal trie node
	pNumSign               // number phases, see number.go
	pNumZero
	pNumInt
	pNumDot
	pNumFrac
	pNumExp
	pNumExpSign
	pNumExpDig
)

// frame is one level of the parse stack. Frames are persistent: a step
// copies the top and shares everything below, so the many states of a
// mask walk cost no copying of the stack.
type frame struct {
	parent *frame
	cost   int32 // completion cost of this frame and all below it
	node   int32
	a, b   int32
	v      int64
	pos    uint8
	flags  uint8
	depth  uint8 // objects and arrays on the stack, this one included
}

// head is one parse: its top frame and the whitespace run it ends with.
type head struct {
	top frame
	ws  uint8
}

// Matcher follows one generation: Mask before each sampled token, Accept
// after. It is not safe for concurrent use.
type Matcher struct {
	g        *Grammar
	v        *Vocab
	c        *costs
	heads    []head
	finished bool // EOS accepted

	lvl [][]head // mask walk: the heads after each trie depth
	u   []int32  // mask walk: each token's completion cost
	ar  arena
}

const dead = int32(math.MaxInt32)

func newMatcher(g *Grammar, v *Vocab, c *costs) *Matcher {
	m := &Matcher{g: g, v: v, c: c, lvl: make([][]head, v.depth+1), u: make([]int32, len(v.pieces))}
	doc := frame{node: g.root, pos: pDocStart}
	doc.cost = c.minVal[g.root]
	m.heads = []head{{top: doc}}
	return m
}

// Done reports whether a complete value has been produced: EOS is allowed
// (or was accepted).
func (m *Matcher) Done() bool {
	if m.finished {
		return true
	}
	for i := range m.heads {
		if m.heads[i].top.cost == 0 {
			return true
		}
	}
	return false
}

// Mask sets to -Inf the logit of every token that cannot continue a valid
// output, and of every token after which the cheapest completion needs
// more than left further tokens (left counts the tokens that may still be
// generated after this one). When no token fits left, the tokens whose
// completion is cheapest stay allowed, so the output gets as close to
// complete as the budget lets it. EOS is allowed exactly when Done. Logits
// past the vocabulary are masked; a shorter logits slice masks its prefix.
func (m *Matcher) Mask(logits []float32, left int) {
	n := min(len(logits), len(m.v.pieces))
	ninf := float32(math.Inf(-1))
	for i := n; i < len(logits); i++ {
		logits[i] = ninf
	}
	u := m.u[:n]
	for i := range u {
		u[i] = dead
	}
	best := dead
	if !m.finished {
		best = m.walk(u)
	}
	if m.Done() || best == dead {
		// Done: EOS ends it. Dead (a vocabulary that cannot continue the
		// value at all): EOS at least ends the generation.
		for _, id := range m.v.eos {
			if int(id) < n {
				u[id] = 0
			}
		}
		best = 0
	}
	thr := max(int32(left), 0, best)
	for i, x := range u {
		if x > thr {
			logits[i] = ninf
		}
	}
}

// walk records each token's cost in u and returns the least.
func (m *Matcher) walk(u []int32) int32 {
	m.ar.reset()
	m.ar.on = true
	defer func() { m.ar.on = false }()
	if len(m.heads) == 1 && m.heads[0].top.pos == pStr && m.heads[0].top.b == 0 {
		return min(m.plainStrings(u), m.walkTrie(&m.v.rest, u))
	}
	return m.walkTrie(&m.v.all, u)
}

// plainStrings prices the plain pieces from a string frame with nothing
// pending: each adds its code points.
func (m *Matcher) plainStrings(u []int32) int32 {
	f := &m.heads[0].top
	n := &m.g.nodes[f.node]
	best := dead
	if n.min == 0 && n.max < 0 {
		for _, t := range m.v.plain {
			if int(t) < len(u) {
				u[t] = f.cost
			}
		}
		return f.cost
	}
	base := f.cost - m.c.strOwn(n, f)
	for i, t := range m.v.plain {
		r := m.v.plainRunes[i]
		if int(t) >= len(u) || n.max >= 0 && f.a+r > n.max {
			continue
		}
		c := add(base, add(m.c.ch['"'], mul(n.min-f.a-r, m.c.strChar)))
		u[t] = c
		best = min(best, c)
	}
	return best
}

// walkTrie runs the heads down a piece trie, skipping the subtree of every
// prefix no head survives, and records each surviving token's cost.
func (m *Matcher) walkTrie(tr *trie, u []int32) int32 {
	nodes, toks := tr.nodes, tr.toks
	m.lvl[0] = append(m.lvl[0][:0], m.heads...)
	best := dead
	for i := 0; i < len(nodes); {
		nd := &nodes[i]
		d := int(nd.depth)
		cur := m.lvl[d][:0]
		if prev := m.lvl[d-1]; len(prev) == 1 && prev[0].top.pos == pStr && prev[0].top.b == 0 && plainASCII(nd.b) {
			cur = m.strChar(cur, prev[0])
		} else {
			cur = m.stepAll(cur, prev, nd.b)
		}
		m.lvl[d] = cur
		if len(cur) == 0 {
			i = int(nd.end)
			continue
		}
		if nd.tok0 >= 0 {
			c := dead
			for j := range cur {
				c = min(c, cur[j].top.cost)
			}
			for _, t := range toks[nd.tok0:nd.tok1] {
				if int(t) < len(u) {
					u[t] = c
				}
			}
			best = min(best, c)
		}
		i++
	}
	return best
}

// Accept advances past tok. It fails, leaving the matcher as it was, when
// the grammar does not allow tok here (budgets are Mask's business: Accept
// takes any token that keeps the output valid) or after EOS.
func (m *Matcher) Accept(tok uint32) error {
	if m.finished {
		return fmt.Errorf("%w: token %d after the end of the value", ErrRejected, tok)
	}
	if m.v.IsEOS(tok) {
		if !m.Done() {
			return fmt.Errorf("%w: EOS (%d) before the value is complete", ErrRejected, tok)
		}
		m.finished = true
		return nil
	}
	p := m.v.Piece(tok)
	if len(p) == 0 {
		return fmt.Errorf("%w: token %d emits no text", ErrRejected, tok)
	}
	cur := m.heads
	for i, b := range p {
		cur = m.stepAll(make([]head, 0, len(cur)), cur, b)
		if len(cur) == 0 {
			return fmt.Errorf("%w: token %d (%q) fails at byte %d", ErrRejected, tok, p, i)
		}
	}
	m.heads = cur
	return nil
}

func plainASCII(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }

// strChar is step for a plain ASCII byte in a string with nothing pending,
// inlined for the walk's hottest case (what strStep would do).
func (m *Matcher) strChar(out []head, h head) []head {
	n := &m.g.nodes[h.top.node]
	if n.max >= 0 && h.top.a >= n.max {
		return out
	}
	if h.top.a < n.min {
		h.top.cost -= m.c.strChar
	}
	h.top.a++
	h.ws = 0
	return append(out, h)
}

func (m *Matcher) stepAll(out, in []head, c byte) []head {
	for i := range in {
		out = m.step(out, in[i].top, in[i].ws, c)
		if len(out) >= MaxHeads {
			return out[:MaxHeads]
		}
	}
	return out
}

// arena hands out the frames of one mask walk, which all die with it; off,
// frames come from the heap (Accept's, which live on in the state).
type arena struct {
	chunks [][]frame
	ci, i  int
	on     bool
}

const chunkFrames = 1024

func (a *arena) alloc() *frame {
	if !a.on {
		return new(frame)
	}
	if a.ci == len(a.chunks) {
		a.chunks = append(a.chunks, make([]frame, chunkFrames))
	}
	f := &a.chunks[a.ci][a.i]
	if a.i++; a.i == chunkFrames {
		a.ci, a.i = a.ci+1, 0
	}
	return f
}

func (a *arena) reset() { a.ci, a.i = 0, 0 }
