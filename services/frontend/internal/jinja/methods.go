package jinja

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// method is a Python method bound to its receiver, as obj.name yields.
type method struct {
	recv any
	name string
}

func (m method) funcName() string { return typeName(m.recv) + "." + m.name }

var (
	strMethods = []string{"strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith",
		"replace", "upper", "lower", "title", "capitalize", "swapcase", "find", "rfind", "index", "rindex", "count",
		"join", "format", "isdigit", "isalpha", "isalnum", "isspace", "isupper", "islower", "isnumeric", "isdecimal",
		"removeprefix", "removesuffix", "partition", "rpartition", "zfill", "center", "ljust", "rjust"}
	dictMethods = []string{"items", "keys", "values", "get", "update", "pop", "setdefault", "copy"}
	listMethods = []string{"append", "pop", "extend", "insert", "index", "count", "copy", "remove", "reverse"}
)

// hasMethod says whether obj.name is a method of obj's type.
func hasMethod(obj any, name string) bool {
	switch obj.(type) {
	case string:
		return slices.Contains(strMethods, name)
	case *Dict:
		return slices.Contains(dictMethods, name)
	case *List:
		return slices.Contains(listMethods, name)
	}
	return false
}

func (m method) call(s *state, args []any, kw []kwarg) (any, error) {
	if err := s.tick(1); err != nil {
		return nil, err
	}
	var v any
	var err error
	switch r := m.recv.(type) {
	case string:
		v, err = s.strMethod(r, m.name, args, kw)
	case *Dict:
		v, err = s.dictMethod(r, m.name, args, kw)
	case *List:
		v, err = s.listMethod(r, m.name, args, kw)
	}
	if err != nil {
		return nil, fmt.Errorf("%s(): %w", m.funcName(), err)
	}
	if out, ok := v.(string); ok {
		if err := s.grow(len(out)); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func isPySpace(r rune) bool { return unicode.IsSpace(r) || r >= 0x1c && r <= 0x1f }

// stripper returns the strip of s: whitespace, or the characters of
// chars when given.
func stripper(chars any) (func(rune) bool, error) {
	switch c := chars.(type) {
	case undefined, nil:
		return isPySpace, nil
	case string:
		return func(r rune) bool { return strings.ContainsRune(c, r) }, nil
	}
	return nil, fmt.Errorf("strip arg must be None or str")
}

func strArg(v any, what string) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%s must be str, not %s", what, typeName(v))
	}
	return s, nil
}

func (s *state) strMethod(r, name string, args []any, kw []kwarg) (any, error) {
	switch name {
	case "strip", "lstrip", "rstrip":
		a, err := bind(name, args, kw, "chars")
		if err != nil {
			return nil, err
		}
		f, err := stripper(a[0])
		if err != nil {
			return nil, err
		}
		switch name {
		case "lstrip":
			return strings.TrimLeftFunc(r, f), nil
		case "rstrip":
			return strings.TrimRightFunc(r, f), nil
		}
		return strings.TrimFunc(r, f), nil
	case "split", "rsplit":
		a, err := bind(name, args, kw, "sep", "maxsplit")
		if err != nil {
			return nil, err
		}
		n := int64(-1)
		if m, ok := integer(a[1]); ok {
			n = m
		}
		if err := s.tick(strings.Count(r, " ") + strings.Count(r, str(a[0]))); err != nil {
			return nil, err
		}
		return pySplit(r, a[0], int(max(min(n, int64(len(r))), -1)), name == "rsplit")
	case "splitlines":
		return s.splitlines(r)
	case "startswith", "endswith":
		return hasAffix(r, name, args, kw)
	case "replace":
		a, err := bind(name, args, kw, "old", "new", "count")
		if err != nil {
			return nil, err
		}
		return s.replace(r, a[0], a[1], a[2])
	case "upper":
		return strings.ToUpper(r), nil
	case "lower":
		return strings.ToLower(r), nil
	case "title":
		return pyTitle(r), nil
	case "capitalize":
		return capitalize(r), nil
	case "swapcase":
		return strings.Map(func(c rune) rune {
			if unicode.IsUpper(c) {
				return unicode.ToLower(c)
			}
			return unicode.ToUpper(c)
		}, r), nil
	}
	return s.strMethodMore(r, name, args, kw)
}

// strMethodMore is the rest of strMethod: searching, joining, formatting
// and padding.
func (s *state) strMethodMore(r, name string, args []any, kw []kwarg) (any, error) {
	switch name {
	case "find", "rfind", "index", "rindex", "count":
		a, err := bind(name, args, kw, "sub")
		if err != nil {
			return nil, err
		}
		sub, err := strArg(a[0], "substring")
		if err != nil {
			return nil, err
		}
		return findIn(r, sub, name)
	case "join":
		a, err := bind(name, args, kw, "iterable")
		if err != nil {
			return nil, err
		}
		items, err := s.iter(a[0])
		if err != nil {
			return nil, err
		}
		parts := make([]string, len(items))
		for i, it := range items {
			if parts[i], err = strArg(it, "sequence item"); err != nil {
				return nil, err
			}
		}
		return s.join(parts, r)
	case "format":
		return s.format(r, args, kw)
	case "removeprefix", "removesuffix":
		a, err := bind(name, args, kw, "affix")
		if err != nil {
			return nil, err
		}
		p, err := strArg(a[0], name+" arg")
		if err != nil {
			return nil, err
		}
		if name == "removeprefix" {
			return strings.TrimPrefix(r, p), nil
		}
		return strings.TrimSuffix(r, p), nil
	case "partition", "rpartition":
		a, err := bind(name, args, kw, "sep")
		if err != nil {
			return nil, err
		}
		sep, err := strArg(a[0], "separator")
		if err != nil || sep == "" {
			return nil, fmt.Errorf("empty or non-str separator")
		}
		i := strings.Index(r, sep)
		if name == "rpartition" {
			i = strings.LastIndex(r, sep)
		}
		if i < 0 {
			if name == "rpartition" {
				return NewList("", "", r), nil
			}
			return NewList(r, "", ""), nil
		}
		return NewList(r[:i], sep, r[i+len(sep):]), nil
	case "zfill", "center", "ljust", "rjust":
		return s.pad(r, name, args, kw)
	}
	return isClass(r, name), nil
}

// hasAffix is str.startswith and str.endswith, with one affix or a
// tuple of them.
func hasAffix(r, name string, args []any, kw []kwarg) (any, error) {
	a, err := bind(name, args, kw, "prefix")
	if err != nil {
		return nil, err
	}
	cands := []any{a[0]}
	if l, ok := a[0].(*List); ok {
		cands = l.Items
	}
	for _, c := range cands {
		p, err := strArg(c, name+" arg")
		if err != nil {
			return nil, err
		}
		if name == "startswith" && strings.HasPrefix(r, p) || name == "endswith" && strings.HasSuffix(r, p) {
			return true, nil
		}
	}
	return false, nil
}

// splitlines is str.splitlines: the lines without their line breaks.
func (s *state) splitlines(r string) (any, error) {
	if err := s.tick(strings.Count(r, "\n")); err != nil {
		return nil, err
	}
	l := &List{}
	for _, line := range strings.Split(strings.ReplaceAll(r, "\r\n", "\n"), "\n") {
		l.Items = append(l.Items, line)
	}
	if n := len(l.Items); n > 0 && l.Items[n-1] == "" {
		l.Items = l.Items[:n-1]
	}
	return l, nil
}
