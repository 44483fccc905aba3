package jinja

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// truthy is Python's truth value.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil, undefined:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case *List:
		return len(x.Items) > 0
	case *Dict:
		return x.Len() > 0
	}
	return true
}

// number returns v as a float and whether it is a number (bools count,
// as in Python).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// integer returns v as an int64 when it is an int or a bool.
func integer(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// equal is Python's ==.
func equal(a, b any) bool { return equalAt(a, b, 0) }

func equalAt(a, b any, depth int) bool {
	if depth > maxNesting {
		return false
	}
	if fa, ok := number(a); ok {
		fb, ok := number(b)
		return ok && fa == fb
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case undefined:
		_, ok := b.(undefined)
		return ok
	case string:
		y, ok := b.(string)
		return ok && x == y
	case *List:
		y, ok := b.(*List)
		if !ok || len(x.Items) != len(y.Items) {
			return false
		}
		for i := range x.Items {
			if !equalAt(x.Items[i], y.Items[i], depth+1) {
				return false
			}
		}
		return true
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, k := range x.keys {
			yv, ok := y.m[k]
			if !ok || !equalAt(x.m[k], yv, depth+1) {
				return false
			}
		}
		return true
	}
	return a == b
}

// compare orders a and b as Python's < does: numbers, strings, or lists
// of those.
func compare(a, b any) (int, error) { return compareAt(a, b, 0) }

func compareAt(a, b any, depth int) (int, error) {
	if depth > maxNesting {
		return 0, fmt.Errorf("comparison nested over %d deep", maxNesting)
	}
	if fa, ok := number(a); ok {
		if fb, ok := number(b); ok {
			switch {
			case fa < fb:
				return -1, nil
			case fa > fb:
				return 1, nil
			}
			return 0, nil
		}
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	case *List:
		if y, ok := b.(*List); ok {
			for i := 0; i < len(x.Items) && i < len(y.Items); i++ {
				if c, err := compareAt(x.Items[i], y.Items[i], depth+1); err != nil || c != 0 {
					return c, err
				}
			}
			return compareInts(len(x.Items), len(y.Items)), nil
		}
	}
	return 0, fmt.Errorf("'<' not supported between instances of '%s' and '%s'", typeName(a), typeName(b))
}

func compareInts(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// iterate returns the items a for loop over v visits: a list's items, a
// dict's keys, a string's characters; none for undefined.
func iterate(v any) ([]any, error) {
	switch x := v.(type) {
	case *List:
		return x.Items, nil
	case *Dict:
		out := make([]any, len(x.keys))
		for i, k := range x.keys {
			out[i] = x.keyValue(k)
		}
		return out, nil
	case string:
		out := make([]any, 0, len(x))
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	case undefined:
		return nil, nil
	}
	return nil, fmt.Errorf("'%s' object is not iterable", typeName(v))
}

// length is Python's len(v); undefined has none.
func length(v any) (int, error) {
	switch x := v.(type) {
	case string:
		return utf8.RuneCountInString(x), nil
	case *List:
		return len(x.Items), nil
	case *Dict:
		return x.Len(), nil
	case undefined:
		return 0, nil
	}
	return 0, fmt.Errorf("object of type '%s' has no len()", typeName(v))
}

// contains is Python's `item in container`.
func contains(container, item any) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := item.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", typeName(item))
		}
		return strings.Contains(c, s), nil
	case *List:
		for _, e := range c.Items {
			if equal(e, item) {
				return true, nil
			}
		}
		return false, nil
	case *Dict:
		k, err := dictKey(item)
		if err != nil {
			return false, err
		}
		_, ok := c.m[k]
		return ok, nil
	case undefined:
		return false, nil
	}
	return false, fmt.Errorf("argument of type '%s' is not iterable", typeName(container))
}
