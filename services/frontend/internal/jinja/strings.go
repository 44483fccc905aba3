package jinja

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// isClass answers the str.isX methods.
func isClass(r, name string) bool {
	if r == "" {
		return false
	}
	test := map[string]func(rune) bool{"isdigit": unicode.IsDigit, "isnumeric": unicode.IsNumber, "isdecimal": unicode.IsDigit,
		"isalpha": unicode.IsLetter, "isalnum": func(c rune) bool { return unicode.IsLetter(c) || unicode.IsNumber(c) },
		"isspace": isPySpace}[name]
	if test != nil {
		return !strings.ContainsFunc(r, func(c rune) bool { return !test(c) })
	}
	cased := false
	for _, c := range r {
		if name == "isupper" && unicode.IsLower(c) || name == "islower" && unicode.IsUpper(c) {
			return false
		}
		cased = cased || unicode.IsUpper(c) || unicode.IsLower(c)
	}
	return cased
}

func findIn(r, sub, name string) (any, error) {
	var i int
	switch name {
	case "count":
		if sub == "" {
			return int64(runesIn(r) + 1), nil
		}
		return int64(strings.Count(r, sub)), nil
	case "find", "index":
		i = strings.Index(r, sub)
	default:
		i = strings.LastIndex(r, sub)
	}
	if i < 0 {
		if name == "index" || name == "rindex" {
			return nil, fmt.Errorf("substring not found")
		}
		return int64(-1), nil
	}
	return int64(runesIn(r[:i])), nil
}

func runesIn(s string) int { return len([]rune(s)) }

func (s *state) pad(r, name string, args []any, kw []kwarg) (any, error) {
	a, err := bind(name, args, kw, "width", "fillchar")
	if err != nil {
		return nil, err
	}
	w, ok := integer(a[0])
	if !ok {
		return nil, fmt.Errorf("width must be an integer")
	}
	fill := " "
	if f, ok := a[1].(string); ok && runesIn(f) == 1 {
		fill = f
	}
	if w > int64(s.maxString) {
		return nil, fmt.Errorf("%w: width %d", ErrLimit, w)
	}
	n := int(w) - runesIn(r)
	if n <= 0 {
		return r, nil
	}
	if err := s.grow(n * len(fill)); err != nil {
		return nil, err
	}
	switch name {
	case "zfill":
		if r != "" && (r[0] == '-' || r[0] == '+') {
			return r[:1] + strings.Repeat("0", n) + r[1:], nil
		}
		return strings.Repeat("0", n) + r, nil
	case "ljust":
		return r + strings.Repeat(fill, n), nil
	case "rjust":
		return strings.Repeat(fill, n) + r, nil
	}
	left := n / 2
	if n%2 == 1 && int(w)%2 == 1 {
		left++
	}
	return strings.Repeat(fill, left) + r + strings.Repeat(fill, n-left), nil
}

// pySplit is str.split and str.rsplit: on runs of whitespace without a
// separator, dropping empty ends; at most maxSplit splits when it is
// not negative.
func pySplit(r string, sep any, maxSplit int, fromRight bool) (any, error) {
	var parts []string
	switch sp := sep.(type) {
	case undefined, nil:
		fields := strings.FieldsFunc(r, isPySpace)
		if maxSplit < 0 || maxSplit >= len(fields) {
			parts = fields
			break
		}
		parts = splitFieldsN(r, maxSplit, fromRight)
	case string:
		if sp == "" {
			return nil, fmt.Errorf("empty separator")
		}
		switch {
		case maxSplit < 0:
			parts = strings.Split(r, sp)
		case !fromRight:
			parts = strings.SplitN(r, sp, maxSplit+1)
		default:
			all := strings.Split(r, sp)
			if len(all) > maxSplit+1 {
				head := strings.Join(all[:len(all)-maxSplit], sp)
				all = append([]string{head}, all[len(all)-maxSplit:]...)
			}
			parts = all
		}
	default:
		return nil, fmt.Errorf("must be str or None, not %s", typeName(sep))
	}
	l := &List{Items: make([]any, len(parts))}
	for i, p := range parts {
		l.Items[i] = p
	}
	return l, nil
}

// splitFieldsN splits on whitespace at most maxSplit times, the rest (with
// its inner whitespace) kept whole, as Python does.
func splitFieldsN(r string, maxSplit int, fromRight bool) []string {
	if fromRight {
		rs := []rune(r)
		slices.Reverse(rs)
		parts := splitFieldsN(string(rs), maxSplit, false)
		for i, p := range parts {
			pr := []rune(p)
			slices.Reverse(pr)
			parts[i] = string(pr)
		}
		slices.Reverse(parts)
		return parts
	}
	var parts []string
	rest := strings.TrimLeftFunc(r, isPySpace)
	for len(parts) < maxSplit && rest != "" {
		i := strings.IndexFunc(rest, isPySpace)
		if i < 0 {
			break
		}
		parts = append(parts, rest[:i])
		rest = strings.TrimLeftFunc(rest[i:], isPySpace)
	}
	if rest != "" {
		parts = append(parts, rest)
	}
	return parts
}

// pyTitle is str.title: each run of letters starts upper case.
func pyTitle(r string) string {
	prev := false
	return strings.Map(func(c rune) rune {
		cased := unicode.IsLetter(c)
		defer func() { prev = cased }()
		if !cased {
			return c
		}
		if prev {
			return unicode.ToLower(c)
		}
		return unicode.ToTitle(c)
	}, r)
}

func capitalize(r string) string {
	rs := []rune(strings.ToLower(r))
	if len(rs) > 0 {
		rs[0] = unicode.ToTitle(rs[0])
	}
	return string(rs)
}

func (s *state) replace(r string, oldV, newV, countV any) (any, error) {
	old, err := strArg(oldV, "replace old")
	if err != nil {
		return nil, err
	}
	repl, err := strArg(newV, "replace new")
	if err != nil {
		return nil, err
	}
	n := -1
	if c, ok := integer(countV); ok {
		n = int(c)
	}
	occ := strings.Count(r, old)
	if old == "" {
		occ = runesIn(r) + 1
	}
	if n >= 0 && n < occ {
		occ = n
	}
	if err := s.grow(len(r) + occ*(len(repl)-len(old))); err != nil {
		return nil, err
	}
	return strings.Replace(r, old, repl, n), nil
}

func (s *state) join(parts []string, sep string) (any, error) {
	n := len(sep) * max(len(parts)-1, 0)
	for _, p := range parts {
		n += len(p)
	}
	if err := s.grow(n); err != nil {
		return nil, err
	}
	return strings.Join(parts, sep), nil
}
