package constrain

// Completion costs drive budget steering: for every matcher state, the
// number of tokens the cheapest completion of the value needs, counting one
// token per character and using only characters the vocabulary has as a
// single-byte token (a character it lacks costs missing, so a completion
// that avoids it wins and one that needs it still ranks). Because the cost
// is that of one fixed completion strategy, emitting the strategy's next
// character lowers it by exactly that character's cost: from any state
// whose cost fits the budget there is a token that keeps it fitting, which
// is what makes "max_tokens at least the minimal value" always end valid.

const (
	inf     = int32(1 << 28) // no completion: a dead or infeasible state
	missing = int32(1 << 10) // a character with no single-byte token
)

func add(a, b int32) int32 { return min(a+b, inf) }

func mul(n, c int32) int32 {
	if n <= 0 {
		return 0
	}
	return int32(min(int64(n)*int64(c), int64(inf)))
}

// costs are the completion costs of one grammar over one vocabulary.
type costs struct {
	ch [256]int32 // per byte: 1, or missing

	// Character classes a completion picks the cheapest of.
	strChar   int32 // an unescaped string character (ASCII, not " or \)
	escLetter int32 // after a backslash: one of "\/bfnrt
	hex       int32 // any hex digit
	hexND     int32 // a hex digit other than d, D (no surrogate escapes)
	hex07     int32 // 0-7 (after \uD)
	digit     int32
	cont      [5]int32 // UTF-8 continuation ranges, see contRange

	minVal []int32   // per node: the cheapest complete value
	need   []uint8   // per node: the nesting depth of that cheapest value
	lit    []int32   // per literal trie node: the cheapest way to its end
	after  [][]int32 // per kObject node: afterCost(i), see objAfter
}

// contRange are the byte ranges a UTF-8 continuation may need: any, and the
// restricted second bytes after E0, ED, F0 and F4.
var contRange = [5][2]byte{{0x80, 0xBF}, {0xA0, 0xBF}, {0x80, 0x9F}, {0x90, 0xBF}, {0x80, 0x8F}}

// costsFor returns g's costs over v, computed once per vocabulary.
func (g *Grammar) costsFor(v *Vocab) *costs {
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.costs[v]; ok {
		return c
	}
	var ch [256]int32
	for b := range ch {
		ch[b] = missing
		if v.single[b] {
			ch[b] = 1
		}
	}
	c := g.computeCosts(&ch)
	if g.costs == nil || len(g.costs) >= 8 { // one model per engine: rarely more than one
		g.costs = map[*Vocab]*costs{}
	}
	g.costs[v] = c
	return c
}

func unitCosts() *[256]int32 {
	var ch [256]int32
	for b := range ch {
		ch[b] = 1
	}
	return &ch
}

func (c *costs) class(lo, hi byte, except ...byte) int32 {
	best := inf
	for b := int(lo); b <= int(hi); b++ {
		skip := false
		for _, e := range except {
			skip = skip || byte(b) == e
		}
		if !skip {
			best = min(best, c.ch[b])
		}
	}
	return best
}

func (g *Grammar) computeCosts(ch *[256]int32) *costs {
	c := &costs{ch: *ch}
	c.strChar = c.class(0x20, 0x7F, '"', '\\')
	c.escLetter = min(c.ch['"'], c.ch['\\'], c.ch['/'], c.ch['b'], c.ch['f'], c.ch['n'], c.ch['r'], c.ch['t'])
	c.hex = min(c.class('0', '9'), c.class('a', 'f'), c.class('A', 'F'))
	c.hexND = min(c.class('0', '9'), c.class('a', 'f', 'd'), c.class('A', 'F', 'D'))
	c.hex07 = c.class('0', '7')
	c.digit = c.class('0', '9')
	for i, r := range contRange {
		c.cont[i] = c.class(r[0], r[1])
	}
	c.minVals(g)
	c.after = make([][]int32, len(g.nodes))
	for i := range g.nodes {
		if g.nodes[i].kind == kObject {
			c.after[i] = c.objAfter(g, &g.nodes[i])
		}
	}
	c.litCosts(g)
	c.need = make([]uint8, len(g.nodes))
	state := make([]uint8, len(g.nodes))
	for i := range g.nodes {
		c.needOf(g, int32(i), state)
	}
	return c
}

// minVals finds every node's cheapest value by iterating to the least
// fixpoint (recursive schemas make the node graph cyclic); a node left at
// inf has no finite instance.
func (c *costs) minVals(g *Grammar) {
	c.minVal = make([]int32, len(g.nodes))
	for i := range c.minVal {
		c.minVal[i] = inf
	}
	for i := range g.nodes { // literals depend on nothing else
		if n := &g.nodes[i]; n.kind == kLiteral {
			c.minVal[i] = c.trieMin(g, n.lit)
		}
	}
	for range len(g.nodes) + 1 {
		changed := false
		for i := len(g.nodes) - 1; i >= 0; i-- { // children mostly come after parents
			if g.nodes[i].kind == kLiteral {
				continue
			}
			if v := c.valueCost(g, &g.nodes[i]); v < c.minVal[i] {
				c.minVal[i], changed = v, true
			}
		}
		if !changed {
			return
		}
	}
}

func (c *costs) keyCost(key []byte) int32 {
	s := int32(0)
	for _, b := range key {
		s = add(s, c.ch[b])
	}
	return s
}

func (c *costs) valueCost(g *Grammar, n *node) int32 {
	switch n.kind {
	case kUnion:
		best := inf
		for _, a := range n.alts {
			best = min(best, c.minVal[a])
		}
		return best
	case kObject:
		s, req := add(c.ch['{'], c.ch['}']), int32(0)
		for _, p := range n.props {
			if p.required {
				s = add(s, add(c.keyCost(p.key), add(c.ch[':'], c.minVal[p.val])))
				req++
			}
		}
		return add(s, mul(req-1, c.ch[',']))
	case kMap:
		return add(c.ch['{'], c.ch['}'])
	case kArray:
		s := add(c.ch['['], c.ch[']'])
		if n.min > 0 {
			s = add(s, add(mul(n.min, c.minVal[n.val]), mul(n.min-1, c.ch[','])))
		}
		return s
	case kString:
		return add(mul(2, c.ch['"']), mul(n.min, c.strChar))
	case kNumber:
		if !n.bounded {
			return c.digit
		}
		return min(c.numCost(n, false, pNumSign, 0, 0, 0), add(c.ch['-'], c.numCost(n, true, pNumSign, 0, 0, 0)))
	}
	return inf
}

// trieMin is the cheapest literal of a trie, computed directly (minVals
// runs before litCosts).
func (c *costs) trieMin(g *Grammar, t int32) int32 {
	l := &g.lits[t]
	best := inf
	if l.terminal {
		best = 0
	}
	for _, e := range l.edges {
		best = min(best, add(c.ch[e.b], c.trieMin(g, e.child)))
	}
	return best
}

// objAfter returns afterCost(i) for i in 0..len(props): the cheapest end of
// an object whose properties before i are done, every required one from i
// on with its comma, then the closing brace.
func (c *costs) objAfter(g *Grammar, n *node) []int32 {
	after := make([]int32, len(n.props)+1)
	after[len(n.props)] = c.ch['}']
	for i := len(n.props) - 1; i >= 0; i-- {
		after[i] = after[i+1]
		if p := n.props[i]; p.required {
			after[i] = add(after[i], add(add(c.ch[','], c.keyCost(p.key)), add(c.ch[':'], c.minVal[p.val])))
		}
	}
	return after
}

// litCosts fills lit for every trie node, children before parents (they
// have larger indices). A key's end costs the rest of its object.
func (c *costs) litCosts(g *Grammar) {
	c.lit = make([]int32, len(g.lits))
	for i := len(g.lits) - 1; i >= 0; i-- {
		l := &g.lits[i]
		best := inf
		switch {
		case l.prop >= 0:
			best = c.keyDone(g, l.owner, l.prop)
		case l.terminal:
			best = 0
		}
		for _, e := range l.edges {
			best = min(best, add(c.ch[e.b], c.lit[e.child]))
		}
		c.lit[i] = best
	}
}

// keyDone is the cost of an object right after the key of property k.
func (c *costs) keyDone(g *Grammar, obj, k int32) int32 {
	p := g.nodes[obj].props[k]
	return add(c.ch[':'], add(c.minVal[p.val], c.after[obj][k+1]))
}

// needOf is the nesting depth of node i's cheapest value. That value is
// well founded (a container's required children are strictly cheaper), so
// the recursion ends; state guards against infeasible cycles.
func (c *costs) needOf(g *Grammar, i int32, state []uint8) uint8 {
	if state[i] != 0 {
		return c.need[i]
	}
	state[i] = 1
	n := &g.nodes[i]
	d := uint8(0)
	switch n.kind {
	case kUnion:
		best := inf
		d = MaxDepth + 1
		for _, a := range n.alts {
			da := c.needOf(g, a, state)
			if v := c.minVal[a]; v < best || v == best && da < d {
				best, d = v, da
			}
		}
	case kObject:
		d = 1
		for _, p := range n.props {
			if p.required {
				d = max(d, sat(c.needOf(g, p.val, state)))
			}
		}
	case kMap:
		d = 1
	case kArray:
		d = 1
		if n.min > 0 {
			d = sat(c.needOf(g, n.val, state))
		}
	}
	c.need[i], state[i] = d, 2
	return d
}

func sat(d uint8) uint8 { return min(d, MaxDepth) + 1 }
