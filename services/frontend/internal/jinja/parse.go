package jinja

import (
	"fmt"
	"slices"
	"strings"
)

// Nesting limits keep parsing and rendering recursion shallow whatever
// the source: real chat templates nest blocks a dozen deep and
// expressions a few dozen.
const (
	maxBlockDepth = 100
	maxExprDepth  = 200
)

// parser builds statements from segments.
type parser struct {
	segs  []segment
	i     int
	depth int // open blocks
	loops int // open for loops (break and continue need one)
}

func parse(segs []segment) ([]node, error) {
	p := &parser{segs: segs}
	body, end, err := p.body()
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, fmt.Errorf("line %d: unexpected '%s'", p.segs[p.i-1].line, end)
	}
	return body, nil
}

// body parses statements up to a block tag whose keyword is one of ends
// (returned, with the parser past that tag) or the end of the template
// (returned as "", an error when ends were expected).
func (p *parser) body(ends ...string) ([]node, string, error) {
	var out []node
	for p.i < len(p.segs) {
		seg := &p.segs[p.i]
		p.i++
		switch seg.kind {
		case segText:
			out = append(out, textNode{seg.text})
		case segVar:
			e, err := p.exprOf(seg)
			if err != nil {
				return nil, "", err
			}
			out = append(out, outputNode{e: e, line: seg.line})
		case segBlock:
			kw := keyword(seg)
			if slices.Contains(ends, kw) {
				return out, kw, nil
			}
			n, err := p.statement(kw, seg)
			if err != nil {
				return nil, "", fmt.Errorf("line %d: %w", seg.line, err)
			}
			if n != nil {
				out = append(out, n)
			}
		}
	}
	if len(ends) > 0 {
		return nil, "", fmt.Errorf("unexpected end of template, expected '%s'", strings.Join(ends, "' or '"))
	}
	return out, "", nil
}

func keyword(seg *segment) string {
	if len(seg.toks) == 0 || seg.toks[0].kind != tokName {
		return ""
	}
	return seg.toks[0].s
}

// exprOf parses a {{ }} tag's expression.
func (p *parser) exprOf(seg *segment) (expr, error) {
	ep := &exprParser{toks: seg.toks}
	e, err := ep.expression(true)
	if err == nil {
		err = ep.end()
	}
	if err != nil {
		return nil, fmt.Errorf("line %d: %w", seg.line, err)
	}
	return e, nil
}

// inner parses a block's body up to one of ends, one level deeper.
func (p *parser) inner(ends ...string) ([]node, string, error) {
	if p.depth++; p.depth > maxBlockDepth {
		return nil, "", fmt.Errorf("blocks nested more than %d deep", maxBlockDepth)
	}
	defer func() { p.depth-- }()
	return p.body(ends...)
}

func (p *parser) statement(kw string, seg *segment) (node, error) {
	ep := &exprParser{toks: seg.toks, i: 1}
	var n node
	var err error
	switch kw {
	case "if":
		n, err = p.ifStmt(ep, seg.line)
	case "for":
		n, err = p.forStmt(ep, seg.line)
	case "set":
		n, err = p.setStmt(ep, seg.line)
	case "macro":
		n, err = p.macroStmt(ep, seg.line)
	case "filter":
		var fs []filterCall
		if fs, err = ep.filterChain(false); err == nil {
			var body []node
			body, _, err = p.inner("endfilter")
			n = filterBlockNode{filters: fs, body: body, line: seg.line}
		}
	case "generation": // Hugging Face's marker of assistant text: renders as its body
		var body []node
		body, _, err = p.inner("endgeneration")
		n = filterBlockNode{body: body, line: seg.line}
	case "do":
		var e expr
		if e, err = ep.expression(true); err == nil {
			n = doNode{e: e, line: seg.line}
		}
	case "break", "continue":
		if p.loops == 0 {
			return nil, fmt.Errorf("'%s' outside a loop", kw)
		}
		n = breakNode{seg.line}
		if kw == "continue" {
			n = continueNode{seg.line}
		}
	case "":
		return nil, fmt.Errorf("expected a statement")
	default:
		return nil, fmt.Errorf("unknown or unexpected tag '%s'", kw)
	}
	if err != nil {
		return nil, err
	}
	return n, ep.end()
}

func (p *parser) ifStmt(ep *exprParser, line int) (node, error) {
	n := ifNode{line: line}
	for {
		cond, err := ep.expression(true)
		if err != nil {
			return nil, err
		}
		if err := ep.end(); err != nil {
			return nil, err
		}
		body, end, err := p.inner("elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds, n.bodies = append(n.conds, cond), append(n.bodies, body)
		seg := &p.segs[p.i-1]
		switch end {
		case "elif":
			ep = &exprParser{toks: seg.toks, i: 1}
			continue
		case "else":
			if err := (&exprParser{toks: seg.toks, i: 1}).end(); err != nil {
				return nil, err
			}
			if n.els, _, err = p.inner("endif"); err != nil {
				return nil, err
			}
		}
		return n, nil
	}
}

func (p *parser) forStmt(ep *exprParser, line int) (node, error) {
	n := forNode{line: line}
	for {
		name, err := ep.name()
		if err != nil {
			return nil, err
		}
		n.targets = append(n.targets, name)
		if !ep.op(",") {
			break
		}
	}
	if !ep.keyword("in") {
		return nil, fmt.Errorf("expected 'in' in for loop")
	}
	var err error
	if n.iter, err = ep.expression(false); err != nil {
		return nil, err
	}
	if ep.keyword("if") {
		if n.cond, err = ep.expression(false); err != nil {
			return nil, err
		}
	}
	if ep.keyword("recursive") {
		return nil, fmt.Errorf("recursive loops are not supported")
	}
	if err := ep.end(); err != nil {
		return nil, err
	}
	p.loops++
	body, end, err := p.inner("else", "endfor")
	p.loops--
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if n.els, _, err = p.inner("endfor"); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (p *parser) setStmt(ep *exprParser, line int) (node, error) {
	name, err := ep.name()
	if err != nil {
		return nil, err
	}
	if ep.op(".") {
		attr, err := ep.name()
		if err != nil {
			return nil, err
		}
		if !ep.op("=") {
			return nil, fmt.Errorf("expected '=' after set %s.%s", name, attr)
		}
		e, err := ep.tuple()
		return setNode{targets: []string{name}, attr: attr, e: e, line: line}, err
	}
	targets := []string{name}
	for ep.op(",") {
		if name, err = ep.name(); err != nil {
			return nil, err
		}
		targets = append(targets, name)
	}
	if ep.op("=") {
		e, err := ep.tuple()
		return setNode{targets: targets, e: e, line: line}, err
	}
	if len(targets) > 1 {
		return nil, fmt.Errorf("expected '=' after set")
	}
	fs, err := ep.filterChain(true)
	if err != nil {
		return nil, err
	}
	if err := ep.end(); err != nil {
		return nil, err
	}
	body, _, err := p.inner("endset")
	return setBlockNode{name: name, filters: fs, body: body, line: line}, err
}

func (p *parser) macroStmt(ep *exprParser, line int) (node, error) {
	name, err := ep.name()
	if err != nil {
		return nil, err
	}
	m := &macro{name: name}
	if !ep.op("(") {
		return nil, fmt.Errorf("expected '(' after macro %s", name)
	}
	for !ep.op(")") {
		param, err := ep.name()
		if err != nil {
			return nil, err
		}
		var def expr
		if ep.op("=") {
			if def, err = ep.expression(true); err != nil {
				return nil, err
			}
		}
		m.params, m.defaults = append(m.params, param), append(m.defaults, def)
		if !ep.op(",") {
			if !ep.op(")") {
				return nil, fmt.Errorf("expected ',' or ')' in macro parameters")
			}
			break
		}
	}
	if err := ep.end(); err != nil {
		return nil, err
	}
	saved := p.loops
	p.loops = 0
	m.body, _, err = p.inner("endmacro")
	p.loops = saved
	return macroNode{m: m, line: line}, err
}
