package jinja

import (
	"errors"
	"fmt"
)

func (s *state) loop(n forNode, f *frame) error {
	v, err := s.eval(n.iter, f)
	if err != nil {
		return err
	}
	items, err := s.iter(v)
	if err != nil {
		return err
	}
	if n.cond != nil {
		var kept []any
		for _, it := range items {
			if err := s.tick(1); err != nil {
				return err
			}
			c := f.child()
			if err := bindTargets(c, n.targets, it); err != nil {
				return err
			}
			ok, err := s.eval(n.cond, c)
			if err != nil {
				return err
			}
			if truthy(ok) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return s.exec(n.els, f)
	}
	for i, it := range items {
		if err := s.tick(1); err != nil {
			return err
		}
		c := f.child()
		if err := bindTargets(c, n.targets, it); err != nil {
			return err
		}
		c.vars["loop"] = &loopObj{items: items, i: i}
		err := s.exec(n.body, c)
		switch {
		case errors.Is(err, errBreak):
			return nil
		case errors.Is(err, errContinue):
		case err != nil:
			return err
		}
	}
	return nil
}

func bindTargets(f *frame, targets []string, item any) error {
	if len(targets) == 1 {
		f.vars[targets[0]] = item
		return nil
	}
	vals, err := unpack(item, len(targets))
	if err != nil {
		return err
	}
	for i, t := range targets {
		f.vars[t] = vals[i]
	}
	return nil
}

// loopObj is a for loop's `loop`.
type loopObj struct {
	items []any
	i     int
}

func (l *loopObj) attr(name string) any {
	n := len(l.items)
	switch name {
	case "index":
		return int64(l.i + 1)
	case "index0":
		return int64(l.i)
	case "revindex":
		return int64(n - l.i)
	case "revindex0":
		return int64(n - l.i - 1)
	case "first":
		return l.i == 0
	case "last":
		return l.i == n-1
	case "length":
		return int64(n)
	case "depth":
		return int64(1)
	case "depth0":
		return int64(0)
	case "previtem":
		if l.i > 0 {
			return l.items[l.i-1]
		}
	case "nextitem":
		if l.i < n-1 {
			return l.items[l.i+1]
		}
	case "cycle":
		return builtin{name: "loop.cycle", fn: func(_ *state, args []any, _ []kwarg) (any, error) {
			if len(args) == 0 {
				return nil, fmt.Errorf("no items for cycling given")
			}
			return args[l.i%len(args)], nil
		}}
	}
	return undefined{name: "loop." + name}
}

// call runs macro m with its arguments bound in a fresh frame.
func (m *macro) call(s *state, args []any, kw []kwarg) (any, error) {
	if s.calls >= s.maxCall {
		return nil, fmt.Errorf("%w: macro calls nested more than %d deep", ErrLimit, s.maxCall)
	}
	s.calls++
	defer func() { s.calls-- }()
	f := m.closure.child()
	var varargs []any
	for i, a := range args {
		if i < len(m.params) {
			f.vars[m.params[i]] = a
		} else {
			varargs = append(varargs, a)
		}
	}
	extra := NewDict()
	for _, k := range kw {
		found := false
		for _, p := range m.params {
			found = found || p == k.name
		}
		if !found {
			extra.Set(k.name, k.val)
			continue
		}
		f.vars[k.name] = k.val
	}
	for i, p := range m.params {
		if _, ok := f.vars[p]; ok {
			continue
		}
		if m.defaults[i] == nil {
			f.vars[p] = undefined{name: p}
			continue
		}
		v, err := s.eval(m.defaults[i], f)
		if err != nil {
			return nil, err
		}
		f.vars[p] = v
	}
	f.vars["varargs"], f.vars["kwargs"] = &List{Items: varargs}, extra
	return s.capture(m.body, f, nil)
}

func (m *macro) funcName() string { return m.name }
