package jinja

import (
	"fmt"
	"math"
	"strings"
)

// builtin is a function the engine provides.
type builtin struct {
	name string
	fn   func(s *state, args []any, kw []kwarg) (any, error)
}

func (b builtin) call(s *state, args []any, kw []kwarg) (any, error) { return b.fn(s, args, kw) }
func (b builtin) funcName() string                                   { return b.name }

// globals are the functions every template sees: Jinja's range, dict,
// namespace and joiner, and the two Hugging Face adds for chat
// templates, raise_exception and strftime_now.
var globals map[string]any

func init() {
	globals = map[string]any{
		"range":           builtin{"range", builtinRange},
		"dict":            builtin{"dict", builtinDict},
		"namespace":       builtin{"namespace", builtinNamespace},
		"joiner":          builtin{"joiner", builtinJoiner},
		"raise_exception": builtin{"raise_exception", builtinRaise},
		"strftime_now":    builtin{"strftime_now", builtinStrftimeNow},
	}
}

func builtinRange(s *state, args []any, kw []kwarg) (any, error) {
	if len(kw) > 0 || len(args) == 0 || len(args) > 3 {
		return nil, fmt.Errorf("range expected 1 to 3 integer arguments")
	}
	n := make([]int64, len(args))
	for i, a := range args {
		v, ok := integer(a)
		if !ok {
			return nil, fmt.Errorf("range: '%s' object cannot be interpreted as an integer", typeName(a))
		}
		n[i] = v
	}
	start, stop, step := int64(0), n[0], int64(1)
	if len(n) > 1 {
		start, stop = n[0], n[1]
	}
	if len(n) > 2 {
		step = n[2]
	}
	if step == 0 {
		return nil, fmt.Errorf("range() arg 3 must not be zero")
	}
	var count uint64
	if step > 0 && stop > start {
		span, st := uint64(stop-start), uint64(step)
		count = span / st
		if span%st != 0 {
			count++
		}
	} else if step < 0 && stop < start {
		span, st := uint64(start-stop), uint64(-step)
		if step == math.MinInt64 {
			st = 1 << 63
		}
		count = span / st
		if span%st != 0 {
			count++
		}
	}
	if count > uint64(s.maxSteps-s.steps) {
		return nil, fmt.Errorf("%w: range of %d items", ErrLimit, count)
	}
	if err := s.tick(int(count)); err != nil {
		return nil, err
	}
	l := &List{Items: make([]any, count)}
	for i := range l.Items {
		l.Items[i] = start + int64(i)*step
	}
	return l, nil
}

func builtinDict(_ *state, args []any, kw []kwarg) (any, error) {
	d := NewDict()
	for _, a := range args {
		src, ok := a.(*Dict)
		if !ok {
			return nil, fmt.Errorf("dict() takes a dict, not %s", typeName(a))
		}
		d.update(src)
	}
	for _, k := range kw {
		d.Set(k.name, k.val)
	}
	return d, nil
}

func builtinNamespace(s *state, args []any, kw []kwarg) (any, error) {
	v, err := builtinDict(s, args, kw)
	if err != nil {
		return nil, err
	}
	d := v.(*Dict)
	d.ns = true
	return d, nil
}

func builtinJoiner(_ *state, args []any, kw []kwarg) (any, error) {
	a, err := bind("joiner", args, kw, "sep")
	if err != nil {
		return nil, err
	}
	sep := ", "
	if !isUndefined(a[0]) {
		sep = str(a[0])
	}
	used := false
	return builtin{name: "joiner", fn: func(*state, []any, []kwarg) (any, error) {
		if !used {
			used = true
			return "", nil
		}
		return sep, nil
	}}, nil
}

func builtinRaise(_ *state, args []any, _ []kwarg) (any, error) {
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = str(a)
	}
	return nil, &RaisedError{Message: strings.Join(parts, " ")}
}

func builtinStrftimeNow(s *state, args []any, kw []kwarg) (any, error) {
	a, err := bind("strftime_now", args, kw, "format")
	if err != nil {
		return nil, err
	}
	f, ok := a[0].(string)
	if !ok {
		return nil, fmt.Errorf("strftime_now expects a format string")
	}
	return strftime(f, s.now()), nil
}

func isUndefined(v any) bool {
	_, ok := v.(undefined)
	return ok
}

// bind matches a call's arguments to named parameters, Python style;
// a parameter not given is undefined.
func bind(fn string, args []any, kw []kwarg, params ...string) ([]any, error) {
	if len(args) > len(params) {
		return nil, fmt.Errorf("%s takes at most %d arguments (%d given)", fn, len(params), len(args))
	}
	out := make([]any, len(params))
	for i := range out {
		out[i] = undefined{name: params[i]}
	}
	copy(out, args)
	for _, k := range kw {
		i := -1
		for j, p := range params {
			if p == k.name {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("%s got an unexpected keyword argument '%s'", fn, k.name)
		}
		if i < len(args) {
			return nil, fmt.Errorf("%s got multiple values for argument '%s'", fn, k.name)
		}
		out[i] = k.val
	}
	return out, nil
}
