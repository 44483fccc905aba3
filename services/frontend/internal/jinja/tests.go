package jinja

import (
	"fmt"
	"strings"
)

// test evaluates `x is [not] name(args)`.
func (s *state) test(e testExpr, f *frame) (any, error) {
	v, err := s.eval(e.obj, f)
	if err != nil {
		return nil, err
	}
	args := make([]any, len(e.args))
	for i, a := range e.args {
		if args[i], err = s.eval(a, f); err != nil {
			return nil, err
		}
	}
	ok, err := s.runTest(e.name, v, args)
	if err != nil {
		return nil, err
	}
	return ok != e.neg, nil
}

// runTest applies Jinja's test name to v.
func (s *state) runTest(name string, v any, args []any) (bool, error) {
	arg := func() (any, error) {
		if len(args) == 0 {
			return nil, fmt.Errorf("test %s needs an argument", name)
		}
		return args[0], nil
	}
	if is, ok := typeTests[name]; ok {
		return is(v), nil
	}
	switch name {
	case "odd", "even", "divisibleby":
		n, ok := integer(v)
		if !ok {
			return false, fmt.Errorf("test %s of %s", name, typeName(v))
		}
		switch name {
		case "odd":
			return n%2 != 0, nil
		case "even":
			return n%2 == 0, nil
		}
		a, err := arg()
		if err != nil {
			return false, err
		}
		d, ok := integer(a)
		if !ok || d == 0 {
			return false, fmt.Errorf("divisibleby needs a non-zero integer")
		}
		return n%d == 0, nil
	case "lower", "upper":
		sv := str(v)
		if name == "lower" {
			return sv == strings.ToLower(sv), nil
		}
		return sv == strings.ToUpper(sv), nil
	case "in":
		a, err := arg()
		if err != nil {
			return false, err
		}
		return contains(a, v)
	case "sameas":
		a, err := arg()
		if err != nil {
			return false, err
		}
		return sameAs(v, a), nil
	case "escaped":
		return false, nil
	}
	ops := map[string]string{"eq": "==", "equalto": "==", "==": "==", "ne": "!=", "!=": "!=", "lt": "<", "lessthan": "<",
		"<": "<", "le": "<=", "<=": "<=", "gt": ">", "greaterthan": ">", ">": ">", "ge": ">=", ">=": ">="}
	if op, ok := ops[name]; ok {
		a, err := arg()
		if err != nil {
			return false, err
		}
		return compareOp(op, v, a)
	}
	return false, fmt.Errorf("no test named '%s'", name)
}

// sameAs is Python's `is`: identity for containers, equal value and
// type for the rest.
func sameAs(a, b any) bool {
	switch x := a.(type) {
	case *List:
		y, ok := b.(*List)
		return ok && x == y
	case *Dict:
		y, ok := b.(*Dict)
		return ok && x == y
	case callable:
		return false
	}
	return typeName(a) == typeName(b) && equal(a, b)
}

// typeTests are the tests of what a value is.
var typeTests = map[string]func(any) bool{
	"defined":   func(v any) bool { return !isUndefined(v) },
	"undefined": isUndefined,
	"none":      func(v any) bool { return v == nil },
	"boolean":   func(v any) bool { _, ok := v.(bool); return ok },
	"true":      func(v any) bool { b, ok := v.(bool); return ok && b },
	"false":     func(v any) bool { b, ok := v.(bool); return ok && !b },
	"integer":   func(v any) bool { _, ok := v.(int64); return ok },
	"float":     func(v any) bool { _, ok := v.(float64); return ok },
	"number": func(v any) bool {
		_, ok := number(v)
		return ok
	},
	"string":  func(v any) bool { _, ok := v.(string); return ok },
	"mapping": func(v any) bool { d, ok := v.(*Dict); return ok && !d.ns },
	"sequence": func(v any) bool {
		switch v.(type) {
		case string, *List, *Dict:
			return true
		}
		return false
	},
	"iterable": func(v any) bool {
		switch v.(type) {
		case string, *List, *Dict, undefined:
			return true
		}
		return false
	},
	"callable": func(v any) bool { _, ok := v.(callable); return ok },
}
