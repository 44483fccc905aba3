package jinja

import "fmt"

// postfix parses .attr, [item or slice] and (call) after e.
func (p *exprParser) postfix(e expr) (expr, error) {
	for n := 1; ; n++ {
		if err := p.nest(n); err != nil {
			return nil, err
		}
		switch {
		case p.op("."):
			t, ok := p.peek()
			switch {
			case ok && t.kind == tokName:
				e = attrExpr{obj: e, name: t.s}
			case ok && t.kind == tokInt:
				e = itemExpr{obj: e, key: literal{t.i}}
			default:
				return nil, p.unexpected("an attribute name")
			}
			p.i++
		case p.op("["):
			var err error
			if e, err = p.subscript(e); err != nil {
				return nil, err
			}
		case p.op("("):
			args, err := p.args()
			if err != nil {
				return nil, err
			}
			e = callExpr{fn: e, args: args}
		default:
			return e, nil
		}
	}
}

func (p *exprParser) subscript(obj expr) (expr, error) {
	var parts [3]expr
	slice := false
	for k := range 3 {
		if t, ok := p.peek(); ok && (t.kind != tokOp || t.s != ":" && t.s != "]") {
			e, err := p.expression(true)
			if err != nil {
				return nil, err
			}
			parts[k] = e
		}
		if k == 2 || !p.op(":") {
			break
		}
		slice = true
	}
	if !p.op("]") {
		return nil, p.unexpected("']'")
	}
	if !slice {
		if parts[0] == nil {
			return nil, fmt.Errorf("empty subscript")
		}
		return itemExpr{obj: obj, key: parts[0]}, nil
	}
	return sliceExpr{obj: obj, lo: parts[0], hi: parts[1], step: parts[2]}, nil
}

// args parses a call's arguments after its "(".
func (p *exprParser) args() (argList, error) {
	var a argList
	for !p.op(")") {
		if t, ok := p.peek(); ok && t.kind == tokName && p.i+1 < len(p.toks) && p.toks[p.i+1].kind == tokOp && p.toks[p.i+1].s == "=" {
			p.i += 2
			e, err := p.expression(true)
			if err != nil {
				return a, err
			}
			a.kw = append(a.kw, kwExpr{name: t.s, e: e})
		} else {
			if len(a.kw) > 0 {
				return a, fmt.Errorf("positional argument follows keyword argument")
			}
			e, err := p.expression(true)
			if err != nil {
				return a, err
			}
			a.pos = append(a.pos, e)
		}
		if !p.op(",") {
			if !p.op(")") {
				return a, p.unexpected("',' or ')'")
			}
			break
		}
	}
	return a, nil
}

// filters parses any |filter and `is test` after e.
func (p *exprParser) filters(e expr) (expr, error) {
	for n := 1; ; n++ {
		if err := p.nest(n); err != nil {
			return nil, err
		}
		switch {
		case p.op("|"):
			f, err := p.filterCall()
			if err != nil {
				return nil, err
			}
			e = filterExpr{obj: e, f: f}
		case p.keyword("is"):
			t := testExpr{obj: e, neg: p.keyword("not")}
			var err error
			if t.name, err = p.name(); err != nil {
				return nil, err
			}
			if p.op("(") {
				args, err := p.args()
				if err != nil {
					return nil, err
				}
				t.args = args.pos
			} else if tk, ok := p.peek(); ok && testArgStart(tk) {
				arg, err := p.primary()
				if err == nil {
					arg, err = p.postfix(arg)
				}
				if err != nil {
					return nil, err
				}
				t.args = []expr{arg}
			}
			e = t
		default:
			return e, nil
		}
	}
}

// testArgStart says whether t begins a test's lone argument, as in
// `x is divisibleby 3` or `x is sameas false`.
func testArgStart(t token) bool {
	switch t.kind {
	case tokString, tokInt, tokFloat:
		return true
	case tokName:
		return t.s != "else" && t.s != "or" && t.s != "and" && t.s != "if" && t.s != "in" && t.s != "not" && t.s != "is"
	}
	return t.s == "[" || t.s == "{" || t.s == "("
}

func (p *exprParser) filterCall() (filterCall, error) {
	name, err := p.name()
	if err != nil {
		return filterCall{}, err
	}
	f := filterCall{name: name}
	if p.op("(") {
		f.args, err = p.args()
	}
	return f, err
}

// filterChain parses the filters of {% filter f|g %} or {% set x | f %};
// leading says the first one starts with "|".
func (p *exprParser) filterChain(leading bool) ([]filterCall, error) {
	var out []filterCall
	for p.i < len(p.toks) {
		if (leading || len(out) > 0) && !p.op("|") {
			return nil, p.unexpected("'|'")
		}
		f, err := p.filterCall()
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	if !leading && len(out) == 0 {
		return nil, p.unexpected("a filter name")
	}
	return out, nil
}
