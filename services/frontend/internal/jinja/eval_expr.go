package jinja

import (
	"fmt"
	"math"
)

func (s *state) eval(e expr, f *frame) (any, error) {
	if err := s.tick(1); err != nil {
		return nil, err
	}
	switch e := e.(type) {
	case literal:
		return e.v, nil
	case nameExpr:
		if v, ok := f.lookup(e.name); ok {
			return v, nil
		}
		return undefined(e), nil
	case listExpr:
		return s.evalList(e, f)
	case dictExpr:
		return s.evalDict(e, f)
	case attrExpr:
		obj, err := s.eval(e.obj, f)
		if err != nil {
			return nil, err
		}
		return getAttr(obj, e.name)
	case itemExpr:
		obj, err := s.eval(e.obj, f)
		if err != nil {
			return nil, err
		}
		k, err := s.eval(e.key, f)
		if err != nil {
			return nil, err
		}
		return getItem(obj, k)
	case sliceExpr:
		return s.slice(e, f)
	case callExpr:
		return s.callExpr(e, f)
	case filterExpr:
		v, err := s.eval(e.obj, f)
		if err != nil {
			return nil, err
		}
		return s.applyFilter(e.f, v, f)
	case testExpr:
		return s.test(e, f)
	case binExpr:
		return s.binary(e, f)
	case compareExpr:
		return s.compareChain(e, f)
	case unaryExpr:
		return s.unary(e, f)
	case condExpr:
		c, err := s.eval(e.cond, f)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return s.eval(e.yes, f)
		}
		if e.no == nil {
			return undefined{}, nil
		}
		return s.eval(e.no, f)
	}
	return nil, fmt.Errorf("unknown expression %T", e)
}

// getAttr is obj.name: a method of obj, else an item of a dict; a name
// that is neither is undefined. Only undefined itself cannot be looked
// into.
func getAttr(obj any, name string) (any, error) {
	switch o := obj.(type) {
	case undefined:
		return nil, undefinedErr(o, name)
	case *loopObj:
		return o.attr(name), nil
	case *Dict:
		if !o.ns && hasMethod(obj, name) {
			return method{recv: obj, name: name}, nil
		}
		if v, ok := o.m[name]; ok {
			return v, nil
		}
	default:
		if hasMethod(obj, name) {
			return method{recv: obj, name: name}, nil
		}
	}
	return undefined{name: name}, nil
}

// getItem is obj[key]: an item, else a method.
func getItem(obj, key any) (any, error) {
	switch o := obj.(type) {
	case undefined:
		return nil, undefinedErr(o, str(key))
	case *Dict:
		if k, err := dictKey(key); err == nil {
			if v, ok := o.m[k]; ok {
				return v, nil
			}
		}
	case *List:
		if i, ok := integer(key); ok {
			if i < 0 {
				i += int64(len(o.Items))
			}
			if i >= 0 && i < int64(len(o.Items)) {
				return o.Items[i], nil
			}
			return undefined{name: fmt.Sprint(key)}, nil
		}
	case string:
		if i, ok := integer(key); ok {
			rs := []rune(o)
			if i < 0 {
				i += int64(len(rs))
			}
			if i >= 0 && i < int64(len(rs)) {
				return string(rs[i]), nil
			}
			return undefined{name: fmt.Sprint(key)}, nil
		}
	case *loopObj:
		if k, ok := key.(string); ok {
			return o.attr(k), nil
		}
	}
	if k, ok := key.(string); ok {
		return getAttr(obj, k)
	}
	return undefined{name: str(key)}, nil
}

func undefinedErr(u undefined, name string) error {
	if u.name == "" {
		return fmt.Errorf("undefined value has no attribute '%s'", name)
	}
	return fmt.Errorf("'%s' is undefined", u.name)
}

func (s *state) slice(e sliceExpr, f *frame) (any, error) {
	obj, err := s.eval(e.obj, f)
	if err != nil {
		return nil, err
	}
	var bounds [3]*int64
	for i, be := range []expr{e.lo, e.hi, e.step} {
		if be == nil {
			continue
		}
		v, err := s.eval(be, f)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		n, ok := integer(v)
		if !ok {
			return nil, fmt.Errorf("slice indices must be integers or None")
		}
		bounds[i] = &n
	}
	switch o := obj.(type) {
	case *List:
		idx, err := sliceIndices(len(o.Items), bounds)
		if err != nil {
			return nil, err
		}
		out := &List{Items: make([]any, len(idx))}
		for i, j := range idx {
			out.Items[i] = o.Items[j]
		}
		return out, nil
	case string:
		rs := []rune(o)
		idx, err := sliceIndices(len(rs), bounds)
		if err != nil {
			return nil, err
		}
		out := make([]rune, len(idx))
		for i, j := range idx {
			out[i] = rs[j]
		}
		return string(out), nil
	case undefined:
		return nil, undefinedErr(o, "[:]")
	}
	return nil, fmt.Errorf("'%s' object is not subscriptable", typeName(obj))
}

// sliceIndices are the positions Python's seq[lo:hi:step] takes.
func sliceIndices(n int, b [3]*int64) ([]int, error) {
	step := int64(1)
	if b[2] != nil {
		step = *b[2]
	}
	if step == 0 {
		return nil, fmt.Errorf("slice step cannot be zero")
	}
	clamp := func(p *int64, def int64) int64 {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			v += int64(n)
		}
		lo, hi := int64(0), int64(n)
		if step < 0 {
			lo, hi = -1, int64(n)-1
		}
		return max(lo, min(v, hi))
	}
	var lo, hi int64
	if step > 0 {
		lo, hi = clamp(b[0], 0), clamp(b[1], int64(n))
	} else {
		lo, hi = clamp(b[0], int64(n)-1), clamp(b[1], -1)
	}
	var out []int
	for i := lo; step > 0 && i < hi || step < 0 && i > hi; i += step {
		out = append(out, int(i))
		if step > 0 && i > math.MaxInt64-step || step < 0 && i < math.MinInt64-step {
			break
		}
	}
	return out, nil
}

func (s *state) args(a argList, f *frame) ([]any, []kwarg, error) {
	pos := make([]any, len(a.pos))
	for i, e := range a.pos {
		v, err := s.eval(e, f)
		if err != nil {
			return nil, nil, err
		}
		pos[i] = v
	}
	var kw []kwarg
	for _, k := range a.kw {
		v, err := s.eval(k.e, f)
		if err != nil {
			return nil, nil, err
		}
		kw = append(kw, kwarg{name: k.name, val: v})
	}
	return pos, kw, nil
}

func (s *state) callExpr(e callExpr, f *frame) (any, error) {
	fn, err := s.eval(e.fn, f)
	if err != nil {
		return nil, err
	}
	args, kw, err := s.args(e.args, f)
	if err != nil {
		return nil, err
	}
	c, ok := fn.(callable)
	if !ok {
		if u, isU := fn.(undefined); isU {
			return nil, fmt.Errorf("'%s' is undefined", u.name)
		}
		return nil, fmt.Errorf("'%s' object is not callable", typeName(fn))
	}
	return c.call(s, args, kw)
}

func (s *state) evalList(e listExpr, f *frame) (any, error) {
	l := &List{Items: make([]any, len(e.items))}
	for i, it := range e.items {
		v, err := s.eval(it, f)
		if err != nil {
			return nil, err
		}
		l.Items[i] = v
	}
	return l, nil
}

func (s *state) evalDict(e dictExpr, f *frame) (any, error) {
	d := NewDict()
	for i, ke := range e.keys {
		k, err := s.eval(ke, f)
		if err != nil {
			return nil, err
		}
		v, err := s.eval(e.vals[i], f)
		if err != nil {
			return nil, err
		}
		if err := d.setKey(k, v); err != nil {
			return nil, err
		}
	}
	return d, nil
}
