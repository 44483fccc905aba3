package constrain

// link turns the compiled node graph into the one matchers run: unions
// flattened, nodes with no finite instance pruned, key tries built.
func (c *compiler) link() error {
	g := c.g
	for i := range g.nodes {
		if g.nodes[i].kind == kUnion {
			alts, err := c.flatten(int32(i))
			if err != nil {
				return err
			}
			g.nodes[i].alts = alts
		}
	}
	unit := g.computeCosts(unitCosts())
	feasible := func(i int32) bool { return unit.minVal[i] < inf }
	if !feasible(g.root) {
		kw := ""
		if c.hasRef {
			kw = "$ref"
		}
		return schemaErr("#", kw, "the schema has no instance to generate (false, or a recursion with no way out)")
	}
	for i := range g.nodes {
		if feasible(int32(i)) {
			prune(&g.nodes[i], feasible)
		}
	}
	for i := range g.nodes {
		if n := &g.nodes[i]; n.kind == kObject {
			c.keyTries(int32(i))
			if err := c.states(); err != nil {
				return err
			}
		}
	}
	g.finish()
	if d := g.computeCosts(unitCosts()).need[g.root]; d > MaxDepth {
		return schemaErr("#", "limit", "the smallest instance nests %d deep, over MaxDepth (%d)", d, MaxDepth)
	}
	return nil
}

// flatten lists the non-union nodes union u stands for, without
// duplicates: a union among its own alternatives ($ref cycles) adds
// nothing, since the least fixpoint of u = A | u is A.
func (c *compiler) flatten(u int32) ([]int32, error) {
	var out []int32
	seen := map[int32]bool{}
	var walk func(int32)
	walk = func(i int32) {
		if seen[i] {
			return
		}
		seen[i] = true
		n := &c.g.nodes[i]
		if n.kind != kUnion {
			out = append(out, i)
			return
		}
		for _, a := range n.alts {
			walk(a)
		}
	}
	walk(u)
	if len(out) > MaxAlternatives {
		return nil, schemaErr("#", "anyOf", "a union of %d alternatives, over MaxAlternatives (%d)", len(out), MaxAlternatives)
	}
	if len(out) == 0 {
		out = []int32{c.g.add(node{kind: kNever})} // a $ref cycle with nothing in it
	}
	return out, nil
}

// prune drops what a feasible node can never finish: union alternatives
// and optional properties with no instance, items that make an array
// non-empty, map values.
func prune(n *node, feasible func(int32) bool) {
	switch n.kind {
	case kUnion:
		var alts []int32
		for _, a := range n.alts {
			if feasible(a) {
				alts = append(alts, a)
			}
		}
		n.alts = alts
	case kObject:
		var props []prop
		for _, p := range n.props {
			if feasible(p.val) {
				props = append(props, p)
			}
		}
		n.props = props
	case kMap:
		if !feasible(n.val) {
			*n = node{kind: kObject}
		}
	case kArray:
		if !feasible(n.val) {
			n.max = 0
		}
	}
}

// keyTries builds, for each position i of object obj, the trie of the
// keys that may come next: the optional properties from i up to and
// including the first required one.
func (c *compiler) keyTries(obj int32) {
	g := c.g
	n := &g.nodes[obj]
	np := int32(len(n.props))
	n.firstReq = make([]int32, np+1)
	n.keyRoot = make([]int32, np+1)
	n.firstReq[np], n.keyRoot[np] = np, -1
	for i := np - 1; i >= 0; i-- {
		n.firstReq[i] = n.firstReq[i+1]
		if n.props[i].required {
			n.firstReq[i] = i
		}
	}
	for i := range np {
		root := int32(len(g.lits))
		g.lits = append(g.lits, lnode{prop: -1, owner: -1})
		last := min(n.firstReq[i], np-1)
		for k := i; k <= last; k++ {
			g.insert(root, n.props[k].key, k, obj)
		}
		n.keyRoot[i] = root
	}
}
