package constrain

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// step appends to out the heads that top (ending a whitespace run of ws)
// becomes after byte c: none when c is not allowed, several when c starts
// a value of a union.
func (m *Matcher) step(out []head, top frame, ws uint8, c byte) []head {
	for {
		switch top.pos {
		case pDocEnd:
			return out
		case pStr:
			return m.strStep(out, top, c)
		case pLit:
			l := &m.g.lits[top.a]
			if nx := l.next(c); nx >= 0 {
				top.a = nx
				return m.push(out, top)
			}
			if !l.terminal {
				return out
			}
		case pNumSign, pNumZero, pNumInt, pNumDot, pNumFrac, pNumExp, pNumExpSign, pNumExpDig:
			if f, ok := numStep(top, &m.g.nodes[top.node], c); ok {
				return m.push(out, f)
			}
			if top.cost != top.parent.cost { // not a complete number
				return out
			}
		default:
			if isWS(c) && top.pos != pObjKey {
				if ws >= MaxWhitespace {
					return out
				}
				return append(out, head{top: top, ws: ws + 1})
			}
			return m.structStep(out, top, c)
		}
		// A complete scalar ends at a byte it cannot take: its parent
		// takes the byte.
		top = *top.parent
	}
}

// push appends f as a head after computing its cost; an f with no
// completion is dropped.
func (m *Matcher) push(out []head, f frame) []head {
	own := m.own(&f)
	if own >= inf {
		return out
	}
	f.cost = own
	if f.parent != nil {
		f.cost = add(own, f.parent.cost)
	}
	return append(out, head{top: f})
}

// pop ends the top container: its parent is the new top.
func (m *Matcher) pop(out []head, f frame) []head {
	return append(out, head{top: *f.parent})
}

// structStep handles a non-whitespace byte at a document, object or array
// position.
func (m *Matcher) structStep(out []head, f frame, c byte) []head {
	n := &m.g.nodes[f.node]
	switch f.pos {
	case pDocStart:
		f.pos = pDocEnd
		return m.startValue(out, f, m.g.root, c)
	case pArrStart, pArrAfter, pArrComma:
		return m.arrStep(out, f, n, c)
	}
	return m.objStep(out, f, n, c)
}

func (m *Matcher) objStep(out []head, f frame, n *node, c byte) []head {
	closeOK := func(next int32) bool { return n.kind == kMap || n.firstReq[next] == int32(len(n.props)) }
	switch f.pos {
	case pObjStart, pObjComma:
		switch {
		case c == '}' && f.pos == pObjStart && closeOK(0):
			return m.pop(out, f)
		case c != '"':
		case n.kind == kMap: // a key of any string
			f.pos = pObjColon
			return m.push(out, frame{parent: m.freeze(f), node: m.g.keyStr, pos: pStr, depth: f.depth})
		case n.keyRoot[f.b] >= 0: // f.b is 0 at pObjStart
			if t := m.g.lits[n.keyRoot[f.b]].next('"'); t >= 0 {
				f.pos, f.a = pObjKey, t
				return m.push(out, f)
			}
		}
	case pObjKey:
		t := m.g.lits[f.a].next(c)
		if t < 0 {
			return out
		}
		if k := m.g.lits[t].prop; k >= 0 {
			f.pos, f.a = pObjColon, k
		} else {
			f.a = t
		}
		return m.push(out, f)
	case pObjColon:
		if c == ':' {
			f.pos = pObjValue
			return m.push(out, f)
		}
	case pObjValue:
		f.pos = pObjAfter
		if n.kind == kMap {
			return m.startValue(out, f, n.val, c)
		}
		f.b = f.a + 1
		return m.startValue(out, f, n.props[f.a].val, c)
	case pObjAfter:
		switch {
		case c == ',' && (n.kind == kMap || f.b < int32(len(n.props))):
			f.pos = pObjComma
			return m.push(out, f)
		case c == '}' && closeOK(f.b):
			return m.pop(out, f)
		}
	}
	return out
}

func (m *Matcher) arrStep(out []head, f frame, n *node, c byte) []head {
	switch f.pos {
	case pArrStart, pArrComma:
		if c == ']' && f.pos == pArrStart && n.min == 0 {
			return m.pop(out, f)
		}
		if n.max >= 0 && f.a >= n.max {
			return out
		}
		f.pos = pArrAfter
		f.a++
		return m.startValue(out, f, n.val, c)
	case pArrAfter:
		switch {
		case c == ',' && (n.max < 0 || f.a < n.max):
			f.pos = pArrComma
			return m.push(out, f)
		case c == ']' && f.a >= n.min:
			return m.pop(out, f)
		}
	}
	return out
}

// startValue starts a value of node val at byte c, below parent (already
// moved past the value): one head per alternative that can start with c.
func (m *Matcher) startValue(out []head, parent frame, val int32, c byte) []head {
	var p *frame
	alts := []int32{val}
	if n := &m.g.nodes[val]; n.kind == kUnion {
		alts = n.alts
	}
	for _, a := range alts {
		if !inSet(&m.g.first[a], c) {
			continue
		}
		n := &m.g.nodes[a]
		if (n.kind == kObject || n.kind == kMap || n.kind == kArray) && int(parent.depth)+int(m.c.need[a]) > MaxDepth {
			continue
		}
		if p == nil {
			p = m.freeze(parent)
		}
		f := frame{parent: p, node: a, depth: p.depth}
		switch n.kind {
		case kObject, kMap:
			f.pos, f.depth = pObjStart, f.depth+1
		case kArray:
			f.pos, f.depth = pArrStart, f.depth+1
		case kString:
			f.pos = pStr
		case kLiteral:
			f.pos, f.a = pLit, m.g.lits[n.lit].next(c)
		case kNumber:
			f.pos = pNumSign
			if c == '-' {
				f.flags = flagNeg
			} else {
				var ok bool
				if f, ok = numStep(f, n, c); !ok {
					continue
				}
			}
		}
		out = m.push(out, f)
	}
	return out
}

// freeze makes f, whose position changed, the shared parent of new
// frames.
func (m *Matcher) freeze(f frame) *frame {
	f.cost = m.own(&f)
	if f.parent != nil {
		f.cost = add(f.cost, f.parent.cost)
	}
	p := m.ar.alloc()
	*p = f
	return p
}

// own is the completion cost of frame f alone: the cheapest way to finish
// its value, not counting the frames below it.
func (m *Matcher) own(f *frame) int32 {
	c, n := m.c, &m.g.nodes[f.node]
	switch f.pos {
	case pDocStart:
		return c.minVal[f.node]
	case pDocEnd:
		return 0
	case pStr:
		return c.strOwn(n, f)
	case pLit:
		return c.lit[f.a]
	case pArrStart, pArrAfter, pArrComma:
		return c.arrOwn(n, f)
	case pNumSign, pNumZero, pNumInt, pNumDot, pNumFrac, pNumExp, pNumExpSign, pNumExpDig:
		return c.numOwn(n, f)
	}
	if n.kind == kMap {
		return c.mapOwn(n, f)
	}
	return c.objOwn(f.node, n, f)
}

func (c *costs) objOwn(obj int32, n *node, f *frame) int32 {
	switch f.pos {
	case pObjStart:
		best := inf
		if n.firstReq[0] == int32(len(n.props)) {
			best = c.ch['}']
		}
		if r := n.keyRoot[0]; r >= 0 {
			best = min(best, c.lit[r])
		}
		return best
	case pObjKey:
		return c.lit[f.a]
	case pObjColon:
		return c.keyDoneAt(n, obj, f.a)
	case pObjValue:
		return add(c.minVal[n.props[f.a].val], c.after[obj][f.a+1])
	case pObjAfter:
		return c.after[obj][f.b]
	case pObjComma:
		return c.lit[n.keyRoot[f.b]]
	}
	return inf
}

func (c *costs) keyDoneAt(n *node, obj, k int32) int32 {
	return add(c.ch[':'], add(c.minVal[n.props[k].val], c.after[obj][k+1]))
}

func (c *costs) mapOwn(n *node, f *frame) int32 {
	switch f.pos {
	case pObjStart, pObjAfter:
		return c.ch['}']
	case pObjColon:
		return add(c.ch[':'], add(c.minVal[n.val], c.ch['}']))
	case pObjValue:
		return add(c.minVal[n.val], c.ch['}'])
	case pObjComma:
		return add(mul(2, c.ch['"']), add(c.ch[':'], add(c.minVal[n.val], c.ch['}'])))
	}
	return inf
}

// arrOwn: a = items started (pArrAfter: done; pArrComma: done, one to come).
func (c *costs) arrOwn(n *node, f *frame) int32 {
	item := c.minVal[n.val]
	rest := func(k int32) int32 { return mul(k, add(c.ch[','], item)) }
	switch f.pos {
	case pArrStart:
		if n.min == 0 {
			return c.ch[']']
		}
		return add(add(item, rest(n.min-1)), c.ch[']'])
	case pArrAfter:
		return add(rest(n.min-f.a), c.ch[']'])
	default:
		return add(add(item, rest(n.min-f.a-1)), c.ch[']'])
	}
}
