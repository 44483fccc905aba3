package jinja

import (
	"fmt"
	"sort"
	"strings"
)

// attrPath looks up a filter's attribute argument: dotted names go
// deeper, digits index lists, as Jinja's attribute getters do.
func attrPath(v any, path string) (any, error) {
	for part := range strings.SplitSeq(path, ".") {
		var err error
		if n, ok := parseIndex(part); ok {
			v, err = getItem(v, n)
		} else {
			v, err = getAttr(v, part)
		}
		if err != nil {
			return nil, err
		}
	}
	return v, nil
}

func parseIndex(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' || n > 1<<40 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// sortKey is the key a value sorts by: the attribute when asked for,
// strings folded to lower case unless case-sensitive.
func sortKey(v any, attribute any, caseSensitive bool) (any, error) {
	if !isUndefined(attribute) && attribute != nil {
		var err error
		if v, err = attrPath(v, str(attribute)); err != nil {
			return nil, err
		}
	}
	if s, ok := v.(string); ok && !caseSensitive {
		return strings.ToLower(s), nil
	}
	return v, nil
}

// sortItems sorts items stably by their keys.
func (s *state) sortItems(items []any, keys []any, reverse bool) ([]any, error) {
	if err := s.tick(len(items) * 8); err != nil {
		return nil, err
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var cmpErr error
	sort.SliceStable(idx, func(a, b int) bool {
		c, err := compare(keys[idx[a]], keys[idx[b]])
		if err != nil && cmpErr == nil {
			cmpErr = err
		}
		if reverse {
			return c > 0
		}
		return c < 0
	})
	out := make([]any, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	return out, cmpErr
}

func filterSort(s *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("sort", args, kw, "reverse", "case_sensitive", "attribute")
	if err != nil {
		return nil, err
	}
	items, err := s.iter(v)
	if err != nil {
		return nil, err
	}
	keys := make([]any, len(items))
	for i, it := range items {
		if keys[i], err = sortKey(it, a[2], truthy(a[1])); err != nil {
			return nil, err
		}
	}
	out, err := s.sortItems(items, keys, truthy(a[0]))
	return &List{Items: out}, err
}

func filterDictsort(s *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("dictsort", args, kw, "case_sensitive", "by", "reverse")
	if err != nil {
		return nil, err
	}
	d, ok := v.(*Dict)
	if !ok {
		return nil, fmt.Errorf("can only sort a mapping, not %s", typeName(v))
	}
	items := make([]any, d.Len())
	keys := make([]any, d.Len())
	byValue := str(a[1]) == "value"
	for i, k := range d.keys {
		items[i] = NewList(d.keyValue(k), d.m[k])
		key := d.keyValue(k)
		if byValue {
			key = d.m[k]
		}
		if keys[i], err = sortKey(key, nil, truthy(a[0])); err != nil {
			return nil, err
		}
	}
	out, err := s.sortItems(items, keys, truthy(a[2]))
	return &List{Items: out}, err
}

func filterUnique(s *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("unique", args, kw, "case_sensitive", "attribute")
	if err != nil {
		return nil, err
	}
	items, err := s.iter(v)
	if err != nil {
		return nil, err
	}
	if err := s.tick(len(items) * len(items) / 16); err != nil {
		return nil, err
	}
	out := &List{}
	var seen []any
	for _, it := range items {
		k, err := sortKey(it, a[1], truthy(a[0]))
		if err != nil {
			return nil, err
		}
		dup := false
		for _, p := range seen {
			dup = dup || equal(p, k)
		}
		if !dup {
			seen = append(seen, k)
			out.Items = append(out.Items, it)
		}
	}
	return out, nil
}

// selectFilter is select, reject, selectattr and rejectattr: keep the
// items (or their attribute) that pass the named test, or are true
// when no test is named.
func selectFilter(keep, byAttr bool) filterFunc {
	return func(s *state, v any, args []any, kw []kwarg) (any, error) {
		items, err := s.iter(v)
		if err != nil {
			return nil, err
		}
		attr := ""
		if byAttr {
			if len(args) == 0 {
				return nil, fmt.Errorf("missing attribute")
			}
			attr, args = str(args[0]), args[1:]
		}
		out := &List{}
		for _, it := range items {
			if err := s.tick(1); err != nil {
				return nil, err
			}
			x := it
			if byAttr {
				if x, err = attrPath(it, attr); err != nil {
					return nil, err
				}
			}
			ok := truthy(x)
			if len(args) > 0 {
				if ok, err = s.runTest(str(args[0]), x, args[1:]); err != nil {
					return nil, err
				}
			}
			if ok == keep {
				out.Items = append(out.Items, it)
			}
		}
		return out, nil
	}
}

func filterMap(s *state, v any, args []any, kw []kwarg) (any, error) {
	items, err := s.iter(v)
	if err != nil {
		return nil, err
	}
	var attr, def any = undefined{}, undefined{}
	var rest []kwarg
	for _, k := range kw {
		switch k.name {
		case "attribute":
			attr = k.val
		case "default":
			def = k.val
		default:
			rest = append(rest, k)
		}
	}
	out := &List{Items: make([]any, len(items))}
	for i, it := range items {
		if err := s.tick(1); err != nil {
			return nil, err
		}
		switch {
		case !isUndefined(attr):
			x, err := attrPath(it, str(attr))
			if err != nil {
				return nil, err
			}
			if isUndefined(x) && !isUndefined(def) {
				x = def
			}
			out.Items[i] = x
		case len(args) > 0:
			if out.Items[i], err = s.filter(str(args[0]), it, args[1:], rest); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("map needs a filter name or attribute=")
		}
	}
	return out, nil
}

func filterSum(s *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("sum", args, kw, "attribute", "start")
	if err != nil {
		return nil, err
	}
	items, err := s.iter(v)
	if err != nil {
		return nil, err
	}
	var total any = int64(0)
	if !isUndefined(a[1]) {
		total = a[1]
	}
	for _, it := range items {
		if !isUndefined(a[0]) {
			if it, err = attrPath(it, str(a[0])); err != nil {
				return nil, err
			}
		}
		if total, err = s.arith("+", total, it); err != nil {
			return nil, err
		}
	}
	return total, nil
}

// minMax is min (sign -1) and max (sign 1).
func minMax(sign int) filterFunc {
	return func(s *state, v any, args []any, kw []kwarg) (any, error) {
		a, err := bind("min/max", args, kw, "case_sensitive", "attribute")
		if err != nil {
			return nil, err
		}
		items, err := s.iter(v)
		if err != nil || len(items) == 0 {
			return undefined{name: "min/max"}, err
		}
		best, bestKey := items[0], any(nil)
		for i, it := range items {
			k, err := sortKey(it, a[1], truthy(a[0]))
			if err != nil {
				return nil, err
			}
			if i == 0 {
				bestKey = k
				continue
			}
			c, err := compare(k, bestKey)
			if err != nil {
				return nil, err
			}
			if c*sign > 0 {
				best, bestKey = it, k
			}
		}
		return best, nil
	}
}
