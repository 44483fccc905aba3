package jinja

import (
	"fmt"
	"strconv"
	"strings"
)

func (s *state) dictMethod(d *Dict, name string, args []any, kw []kwarg) (any, error) {
	if err := s.tick(d.Len()); err != nil {
		return nil, err
	}
	switch name {
	case "items", "keys", "values":
		if len(args)+len(kw) > 0 {
			return nil, fmt.Errorf("takes no arguments")
		}
		l := &List{Items: make([]any, d.Len())}
		for i, k := range d.keys {
			switch name {
			case "items":
				l.Items[i] = NewList(d.keyValue(k), d.m[k])
			case "keys":
				l.Items[i] = d.keyValue(k)
			default:
				l.Items[i] = d.m[k]
			}
		}
		return l, nil
	case "get", "pop", "setdefault":
		a, err := bind(name, args, kw, "key", "default")
		if err != nil {
			return nil, err
		}
		def := a[1]
		if isUndefined(def) && name != "pop" {
			def = nil
		}
		k, err := dictKey(a[0])
		if err != nil {
			return nil, err
		}
		v, found := d.m[k]
		switch {
		case found:
			if name == "pop" {
				d.del(k)
			}
			return v, nil
		case name == "pop" && isUndefined(def):
			return nil, fmt.Errorf("key %s not found", str(a[0]))
		case name == "setdefault":
			_ = d.setKey(a[0], def)
		}
		return def, nil
	case "update":
		for _, a := range args {
			src, ok := a.(*Dict)
			if !ok {
				return nil, fmt.Errorf("takes a dict, not %s", typeName(a))
			}
			d.update(src)
		}
		for _, k := range kw {
			d.Set(k.name, k.val)
		}
		return nil, nil
	case "copy":
		c := NewDict()
		c.update(d)
		return c, nil
	}
	return nil, fmt.Errorf("no method %s", name)
}

func (s *state) listMethod(l *List, name string, args []any, kw []kwarg) (any, error) {
	switch name {
	case "append":
		a, err := bind(name, args, kw, "object")
		if err != nil {
			return nil, err
		}
		l.Items = append(l.Items, a[0])
		return nil, nil
	case "extend":
		a, err := bind(name, args, kw, "iterable")
		if err != nil {
			return nil, err
		}
		items, err := s.iter(a[0])
		if err != nil {
			return nil, err
		}
		if err := s.tick(len(items)); err != nil {
			return nil, err
		}
		l.Items = append(l.Items, items...)
		return nil, nil
	case "pop", "insert":
		return listPopInsert(l, name, args, kw)
	case "index", "count", "remove":
		return s.listSearch(l, name, args, kw)
	case "copy":
		return &List{Items: append([]any{}, l.Items...)}, nil
	case "reverse":
		for i, j := 0, len(l.Items)-1; i < j; i, j = i+1, j-1 {
			l.Items[i], l.Items[j] = l.Items[j], l.Items[i]
		}
		return nil, nil
	}
	return nil, fmt.Errorf("no method %s", name)
}

// format is str.format: {} and {0} take positional arguments, {name}
// keyword ones; a format spec after ":" is applied as formatSpec does.
func (s *state) format(r string, args []any, kw []kwarg) (any, error) {
	var b strings.Builder
	auto := 0
	for i := 0; i < len(r); i++ {
		c := r[i]
		switch {
		case c == '{' && i+1 < len(r) && r[i+1] == '{', c == '}' && i+1 < len(r) && r[i+1] == '}':
			b.WriteByte(c)
			i++
			continue
		case c == '}':
			return nil, fmt.Errorf("single '}' encountered in format string")
		case c != '{':
			b.WriteByte(c)
			continue
		}
		end := strings.IndexByte(r[i:], '}')
		if end < 0 {
			return nil, fmt.Errorf("single '{' encountered in format string")
		}
		field := r[i+1 : i+end]
		i += end
		field, spec, _ := strings.Cut(field, ":")
		var v any
		switch n, err := strconv.Atoi(field); {
		case field == "":
			if auto >= len(args) {
				return nil, fmt.Errorf("replacement index %d out of range", auto)
			}
			v = args[auto]
			auto++
		case err == nil:
			if n < 0 || n >= len(args) {
				return nil, fmt.Errorf("replacement index %d out of range", n)
			}
			v = args[n]
		default:
			found := false
			for _, k := range kw {
				if k.name == field {
					v, found = k.val, true
				}
			}
			if !found {
				return nil, fmt.Errorf("missing format key '%s'", field)
			}
		}
		out, err := formatSpec(v, spec)
		if err != nil {
			return nil, err
		}
		b.WriteString(out)
		if err := s.grow(len(out)); err != nil {
			return nil, err
		}
	}
	return b.String(), nil
}

// formatSpec applies a format spec [[fill]align][width][.precision][type]
// (the parts chat templates use) to v.
func formatSpec(v any, spec string) (string, error) {
	if spec == "" {
		return str(v), nil
	}
	fill, align := " ", byte(0)
	if len(spec) >= 2 && strings.IndexByte("<>^", spec[1]) >= 0 {
		fill, align, spec = spec[:1], spec[1], spec[2:]
	} else if spec != "" && strings.IndexByte("<>^", spec[0]) >= 0 {
		align, spec = spec[0], spec[1:]
	}
	if err := checkWidths(spec); err != nil {
		return "", err
	}
	j := 0
	for j < len(spec) && spec[j] >= '0' && spec[j] <= '9' {
		j++
	}
	width, _ := strconv.Atoi(spec[:j])
	spec = spec[j:]
	out := str(v)
	if spec != "" {
		n, ok := number(v)
		if !ok {
			return "", fmt.Errorf("unknown format code for object of type '%s'", typeName(v))
		}
		switch verb := spec[len(spec)-1]; verb {
		case 'd':
			out = strconv.FormatInt(int64(n), 10)
		case 'f', 'e', 'g', '%':
			prec := 6
			if p, ok := strings.CutPrefix(spec[:len(spec)-1], "."); ok {
				prec, _ = strconv.Atoi(p)
			}
			if verb == '%' {
				out = strconv.FormatFloat(n*100, 'f', prec, 64) + "%"
			} else {
				out = strconv.FormatFloat(n, verb, prec, 64)
			}
		default:
			return "", fmt.Errorf("unsupported format spec %q", spec)
		}
		if align == 0 {
			align = '>'
		}
	}
	pad := width - runesIn(out)
	if pad <= 0 {
		return out, nil
	}
	switch align {
	case '>':
		return strings.Repeat(fill, pad) + out, nil
	case '^':
		return strings.Repeat(fill, pad/2) + out + strings.Repeat(fill, pad-pad/2), nil
	}
	return out + strings.Repeat(fill, pad), nil
}

// listPopInsert is list.pop([index]) and list.insert(index, object).
func listPopInsert(l *List, name string, args []any, kw []kwarg) (any, error) {
	params := []string{"index"}
	if name == "insert" {
		params = append(params, "object")
	}
	a, err := bind(name, args, kw, params...)
	if err != nil {
		return nil, err
	}
	n := int64(len(l.Items))
	i, ok := integer(a[0])
	if !ok {
		i = n - 1
		if name == "insert" {
			return nil, fmt.Errorf("index must be an integer")
		}
	}
	if i < 0 {
		i += n
	}
	if name == "insert" {
		i = max(0, min(i, n))
		l.Items = append(l.Items[:i], append([]any{a[1]}, l.Items[i:]...)...)
		return nil, nil
	}
	if i < 0 || i >= n {
		return nil, fmt.Errorf("pop index out of range")
	}
	v := l.Items[i]
	l.Items = append(l.Items[:i:i], l.Items[i+1:]...)
	return v, nil
}

// listSearch is list.index, list.count and list.remove.
func (s *state) listSearch(l *List, name string, args []any, kw []kwarg) (any, error) {
	a, err := bind(name, args, kw, "value")
	if err != nil {
		return nil, err
	}
	if err := s.tick(len(l.Items)); err != nil {
		return nil, err
	}
	count := int64(0)
	for i, it := range l.Items {
		if !equal(it, a[0]) {
			continue
		}
		switch name {
		case "index":
			return int64(i), nil
		case "remove":
			l.Items = append(l.Items[:i:i], l.Items[i+1:]...)
			return nil, nil
		}
		count++
	}
	if name == "count" {
		return count, nil
	}
	return nil, fmt.Errorf("%s is not in list", str(a[0]))
}
