package jinja

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Template is a parsed template. It is immutable: renders may run
// concurrently.
type Template struct {
	name string
	body []node
}

// MaxSourceBytes bounds a template's source.
const MaxSourceBytes = 4 << 20

// maxStringBytes bounds any one string a render builds; repr and tojson
// stop a little past it, so a huge structure fails on the limit instead
// of being built.
const maxStringBytes = 32 << 20

// Parse parses src; name identifies the template in errors.
func Parse(name, src string) (*Template, error) {
	if len(src) > MaxSourceBytes {
		return nil, fmt.Errorf("template %s: %d bytes, more than %d", name, len(src), MaxSourceBytes)
	}
	segs, err := lex(src)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	body, err := parse(segs)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return &Template{name: name, body: body}, nil
}

// Name is the name the template was parsed with.
func (t *Template) Name() string { return t.name }

// Limits bound one render, so that any template, however written,
// finishes quickly: a render that would pass one fails with ErrLimit.
type Limits struct {
	// Steps bounds the statements, expressions and loop iterations
	// evaluated (default 5 million: about a second of work, where a
	// thousand-message conversation takes a few hundred thousand).
	Steps int
	// Bytes bounds the bytes of all strings built, output included
	// (default 256 MiB); no one string, the output included, may pass
	// a quarter of it or 32 MiB.
	Bytes int
	// Calls bounds how deep macro calls nest (default 64).
	Calls int
}

// Options tune a render; the zero value is the defaults.
type Options struct {
	Limits Limits
	// Now is the clock strftime_now reads (default time.Now).
	Now func() time.Time
}

// ErrLimit is returned, wrapped, by a render that passed its Limits.
var ErrLimit = errors.New("template exceeded its render limits")

// RaisedError is what a template's raise_exception(message) returns: the
// template refusing its input, with its own message.
type RaisedError struct {
	Message string
}

func (e *RaisedError) Error() string { return e.Message }

// Render renders the template with vars as its globals. A failure names
// the template and the line.
func (t *Template) Render(vars map[string]any, o Options) (string, error) {
	s := newState(o)
	root := &frame{vars: make(map[string]any, len(vars))}
	for k, v := range vars {
		root.vars[k] = From(v)
	}
	var out strings.Builder
	s.out = &out
	if err := s.exec(t.body, root); err != nil {
		if errors.Is(err, errBreak) || errors.Is(err, errContinue) {
			err = fmt.Errorf("break or continue outside a loop")
		}
		return "", fmt.Errorf("template %s: %w", t.name, err)
	}
	return out.String(), nil
}

// state is one render in progress.
type state struct {
	out            *strings.Builder
	steps, bytes   int
	maxSteps       int
	maxBytes       int
	maxString      int
	calls, maxCall int
	now            func() time.Time
}

func newState(o Options) *state {
	s := &state{maxSteps: o.Limits.Steps, maxBytes: o.Limits.Bytes, maxCall: o.Limits.Calls, now: o.Now}
	if s.maxSteps <= 0 {
		s.maxSteps = 5_000_000
	}
	if s.maxBytes <= 0 {
		s.maxBytes = 256 << 20
	}
	if s.maxCall <= 0 {
		s.maxCall = 64
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.maxString = min(s.maxBytes/4, maxStringBytes)
	return s
}

// tick spends n steps.
func (s *state) tick(n int) error {
	if s.steps += n; s.steps > s.maxSteps {
		return fmt.Errorf("%w: more than %d steps", ErrLimit, s.maxSteps)
	}
	return nil
}

// iter is iterate, paid for in steps before a string is split into
// its characters.
func (s *state) iter(v any) ([]any, error) {
	n, err := length(v)
	if err != nil {
		return iterate(v)
	}
	if n > s.maxSteps-s.steps {
		return nil, fmt.Errorf("%w: iterating over %d items", ErrLimit, n)
	}
	if err := s.tick(n); err != nil {
		return nil, err
	}
	return iterate(v)
}

// grow accounts for building a string of n bytes.
func (s *state) grow(n int) error {
	n = max(n, 0)
	if n > s.maxString {
		return fmt.Errorf("%w: a string of %d bytes", ErrLimit, n)
	}
	if s.bytes += n; s.bytes > s.maxBytes {
		return fmt.Errorf("%w: more than %d bytes built", ErrLimit, s.maxBytes)
	}
	return nil
}

func (s *state) write(str string) error {
	if err := s.grow(len(str)); err != nil {
		return err
	}
	if s.out.Len()+len(str) > s.maxString {
		return fmt.Errorf("%w: output over %d bytes", ErrLimit, s.maxString)
	}
	s.out.WriteString(str)
	return nil
}

// frame is a scope: the template's top level, a loop iteration or a
// macro call. Assignments go to the innermost frame, so a set inside a
// loop does not outlive its iteration (namespace() is how templates
// carry state out, as in Jinja).
type frame struct {
	vars   map[string]any
	parent *frame
}

func (f *frame) lookup(name string) (any, bool) {
	for ; f != nil; f = f.parent {
		if v, ok := f.vars[name]; ok {
			return v, true
		}
	}
	v, ok := globals[name]
	return v, ok
}

func (f *frame) child() *frame { return &frame{vars: map[string]any{}, parent: f} }

var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)

// lineError places an error at a template line (the innermost one).
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

func atLine(line int, err error) error {
	var le *lineError
	if err == nil || errors.Is(err, errBreak) || errors.Is(err, errContinue) || errors.As(err, &le) {
		return err
	}
	return &lineError{line: line, err: err}
}

func (s *state) exec(nodes []node, f *frame) error {
	for _, n := range nodes {
		if err := s.tick(1); err != nil {
			return err
		}
		if err := s.node(n, f); err != nil {
			return err
		}
	}
	return nil
}

func (s *state) node(n node, f *frame) error {
	switch n := n.(type) {
	case textNode:
		return s.write(n.text)
	case outputNode:
		v, err := s.eval(n.e, f)
		if err != nil {
			return atLine(n.line, err)
		}
		return atLine(n.line, s.write(str(v)))
	case ifNode:
		for i, c := range n.conds {
			v, err := s.eval(c, f)
			if err != nil {
				return atLine(n.line, err)
			}
			if truthy(v) {
				return s.exec(n.bodies[i], f)
			}
		}
		return s.exec(n.els, f)
	case forNode:
		return atLine(n.line, s.loop(n, f))
	case setNode:
		return atLine(n.line, s.set(n, f))
	case setBlockNode:
		v, err := s.capture(n.body, f, n.filters)
		if err == nil {
			f.vars[n.name] = v
		}
		return atLine(n.line, err)
	case macroNode:
		m := *n.m
		m.closure = f
		f.vars[m.name] = &m
		return nil
	case filterBlockNode:
		v, err := s.capture(n.body, f, n.filters)
		if err != nil {
			return atLine(n.line, err)
		}
		return s.write(str(v))
	case doNode:
		_, err := s.eval(n.e, f)
		return atLine(n.line, err)
	case breakNode:
		return errBreak
	case continueNode:
		return errContinue
	}
	return fmt.Errorf("unknown node %T", n)
}

// capture renders body to a string and applies filters to it.
func (s *state) capture(body []node, f *frame, filters []filterCall) (any, error) {
	saved := s.out
	var b strings.Builder
	s.out = &b
	err := s.exec(body, f)
	s.out = saved
	if err != nil {
		return nil, err
	}
	var v any = b.String()
	for _, fc := range filters {
		if v, err = s.applyFilter(fc, v, f); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (s *state) set(n setNode, f *frame) error {
	v, err := s.eval(n.e, f)
	if err != nil {
		return err
	}
	if n.attr != "" {
		obj, _ := f.lookup(n.targets[0])
		d, ok := obj.(*Dict)
		if !ok || !d.ns {
			return fmt.Errorf("cannot assign attribute on non-namespace object '%s'", n.targets[0])
		}
		d.Set(n.attr, v)
		return nil
	}
	if len(n.targets) == 1 {
		f.vars[n.targets[0]] = v
		return nil
	}
	items, err := unpack(v, len(n.targets))
	if err != nil {
		return err
	}
	for i, t := range n.targets {
		f.vars[t] = items[i]
	}
	return nil
}

func unpack(v any, n int) ([]any, error) {
	if m, err := length(v); err == nil && m != n {
		return nil, fmt.Errorf("expected %d values to unpack, got %d", n, m)
	}
	items, err := iterate(v)
	if err != nil {
		return nil, fmt.Errorf("cannot unpack %s", typeName(v))
	}
	if len(items) != n {
		return nil, fmt.Errorf("expected %d values to unpack, got %d", n, len(items))
	}
	return items, nil
}
