package jinja

import (
	"fmt"
)

// exprParser parses the expression tokens of one tag, with Jinja's
// precedence: conditional, or, and, not, comparisons, + -, ~, * / // %,
// **, unary - +, then primaries with their postfixes (.attr, [item],
// (call)) and filters and tests, which bind tightest.
type exprParser struct {
	toks  []token
	i     int
	depth int
}

func (p *exprParser) peek() (token, bool) {
	if p.i < len(p.toks) {
		return p.toks[p.i], true
	}
	return token{}, false
}

// op consumes the operator o if it is next.
func (p *exprParser) op(o string) bool {
	if t, ok := p.peek(); ok && t.kind == tokOp && t.s == o {
		p.i++
		return true
	}
	return false
}

// keyword consumes the name kw if it is next.
func (p *exprParser) keyword(kw string) bool {
	if p.isKeyword(kw) {
		p.i++
		return true
	}
	return false
}

func (p *exprParser) isKeyword(kw string) bool {
	t, ok := p.peek()
	return ok && t.kind == tokName && t.s == kw
}

func (p *exprParser) name() (string, error) {
	t, ok := p.peek()
	if !ok || t.kind != tokName {
		return "", p.unexpected("a name")
	}
	p.i++
	return t.s, nil
}

func (p *exprParser) end() error {
	if p.i < len(p.toks) {
		return p.unexpected("end of tag")
	}
	return nil
}

func (p *exprParser) unexpected(want string) error {
	t, ok := p.peek()
	if !ok {
		return fmt.Errorf("expected %s, got end of tag", want)
	}
	return fmt.Errorf("expected %s, got %s", want, describe(t))
}

func describe(t token) string {
	switch t.kind {
	case tokString:
		return fmt.Sprintf("string %q", t.s)
	case tokInt:
		return fmt.Sprintf("integer %d", t.i)
	case tokFloat:
		return fmt.Sprintf("float %v", t.f)
	}
	return fmt.Sprintf("'%s'", t.s)
}

// nest guards recursion; every recursive entry calls it.
func (p *exprParser) nest(n int) error {
	if p.depth+n > maxExprDepth {
		return fmt.Errorf("expression nested more than %d deep", maxExprDepth)
	}
	return nil
}

// expression parses an expression; withCond allows `a if b else c`.
func (p *exprParser) expression(withCond bool) (expr, error) {
	if err := p.nest(1); err != nil {
		return nil, err
	}
	p.depth++
	defer func() { p.depth-- }()
	e, err := p.or()
	if err != nil || !withCond || !p.keyword("if") {
		return e, err
	}
	c := condExpr{yes: e}
	if c.cond, err = p.or(); err != nil {
		return nil, err
	}
	if p.keyword("else") {
		if c.no, err = p.expression(true); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// tuple parses a, b, c (a list) or a single expression.
func (p *exprParser) tuple() (expr, error) {
	e, err := p.expression(true)
	if err != nil || !p.op(",") {
		return e, err
	}
	l := listExpr{items: []expr{e}}
	for p.i < len(p.toks) {
		if e, err = p.expression(true); err != nil {
			return nil, err
		}
		l.items = append(l.items, e)
		if !p.op(",") {
			break
		}
	}
	return l, nil
}

// binary parses a left-associative chain of next joined by the
// operators (or keywords) in ops.
func (p *exprParser) binary(next func() (expr, error), keywords bool, ops ...string) (expr, error) {
	l, err := next()
	for n := 1; err == nil; n++ {
		op := ""
		for _, o := range ops {
			if keywords && p.keyword(o) || !keywords && p.op(o) {
				op = o
				break
			}
		}
		if op == "" {
			return l, nil
		}
		if err := p.nest(n); err != nil {
			return nil, err
		}
		var r expr
		if r, err = next(); err == nil {
			l = binExpr{op: op, l: l, r: r}
		}
	}
	return nil, err
}

func (p *exprParser) or() (expr, error)  { return p.binary(p.and, true, "or") }
func (p *exprParser) and() (expr, error) { return p.binary(p.not, true, "and") }

func (p *exprParser) not() (expr, error) {
	if !p.keyword("not") {
		return p.compare()
	}
	if err := p.nest(1); err != nil {
		return nil, err
	}
	p.depth++
	defer func() { p.depth-- }()
	x, err := p.not()
	return unaryExpr{op: "not", x: x}, err
}

func (p *exprParser) compare() (expr, error) {
	first, err := p.math1()
	if err != nil {
		return nil, err
	}
	c := compareExpr{first: first}
	for {
		op := ""
		for _, o := range []string{"==", "!=", "<", ">", "<=", ">="} {
			if p.op(o) {
				op = o
				break
			}
		}
		switch {
		case op != "":
		case p.keyword("in"):
			op = "in"
		case p.isKeyword("not") && p.i+1 < len(p.toks) && p.toks[p.i+1].kind == tokName && p.toks[p.i+1].s == "in":
			p.i += 2
			op = "not in"
		}
		if op == "" {
			break
		}
		if err := p.nest(len(c.ops) + 1); err != nil {
			return nil, err
		}
		r, err := p.math1()
		if err != nil {
			return nil, err
		}
		c.ops, c.rights = append(c.ops, op), append(c.rights, r)
	}
	if len(c.ops) == 0 {
		return first, nil
	}
	return c, nil
}

func (p *exprParser) math1() (expr, error)  { return p.binary(p.concat, false, "+", "-") }
func (p *exprParser) concat() (expr, error) { return p.binary(p.math2, false, "~") }
func (p *exprParser) math2() (expr, error)  { return p.binary(p.pow, false, "*", "/", "//", "%") }
func (p *exprParser) pow() (expr, error) {
	return p.binary(func() (expr, error) { return p.unary(true) }, false, "**")
}

func (p *exprParser) unary(withFilter bool) (expr, error) {
	var e expr
	var err error
	if t, ok := p.peek(); ok && t.kind == tokOp && (t.s == "-" || t.s == "+") {
		p.i++
		if err := p.nest(1); err != nil {
			return nil, err
		}
		p.depth++
		x, err := p.unary(false)
		p.depth--
		if err != nil {
			return nil, err
		}
		e = unaryExpr{op: t.s, x: x}
	} else if e, err = p.primary(); err != nil {
		return nil, err
	}
	if e, err = p.postfix(e); err != nil || !withFilter {
		return e, err
	}
	return p.filters(e)
}

func (p *exprParser) primary() (expr, error) {
	t, ok := p.peek()
	if !ok {
		return nil, p.unexpected("an expression")
	}
	p.i++
	switch t.kind {
	case tokName:
		switch t.s {
		case "true", "True":
			return literal{true}, nil
		case "false", "False":
			return literal{false}, nil
		case "none", "None":
			return literal{nil}, nil
		}
		return nameExpr{t.s}, nil
	case tokString:
		s := t.s
		for {
			n, ok := p.peek()
			if !ok || n.kind != tokString {
				break
			}
			s += n.s
			p.i++
		}
		return literal{s}, nil
	case tokInt:
		return literal{t.i}, nil
	case tokFloat:
		return literal{t.f}, nil
	}
	switch t.s {
	case "(":
		if p.op(")") {
			return listExpr{}, nil
		}
		e, err := p.tuple()
		if err != nil {
			return nil, err
		}
		if !p.op(")") {
			return nil, p.unexpected("')'")
		}
		return e, nil
	case "[":
		items, err := p.items("]")
		return listExpr{items: items}, err
	case "{":
		return p.dict()
	}
	p.i--
	return nil, p.unexpected("an expression")
}

// items parses expressions separated by commas up to close.
func (p *exprParser) items(closer string) ([]expr, error) {
	var out []expr
	for !p.op(closer) {
		e, err := p.expression(true)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
		if !p.op(",") {
			if !p.op(closer) {
				return nil, p.unexpected("',' or '" + closer + "'")
			}
			break
		}
	}
	return out, nil
}

func (p *exprParser) dict() (expr, error) {
	var d dictExpr
	for !p.op("}") {
		k, err := p.expression(true)
		if err != nil {
			return nil, err
		}
		if !p.op(":") {
			return nil, p.unexpected("':'")
		}
		v, err := p.expression(true)
		if err != nil {
			return nil, err
		}
		d.keys, d.vals = append(d.keys, k), append(d.vals, v)
		if !p.op(",") {
			if !p.op("}") {
				return nil, p.unexpected("',' or '}'")
			}
			break
		}
	}
	return d, nil
}
