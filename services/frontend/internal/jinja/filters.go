package jinja

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// filterFunc is a filter: v|name(args).
type filterFunc func(s *state, v any, args []any, kw []kwarg) (any, error)

// filters are Jinja's built-in filters that chat templates use, with
// tojson as Hugging Face defines it, and from_json as llama.cpp adds it.
var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"tojson": filterToJSON, "from_json": filterFromJSON,
		"trim": filterTrim, "length": filterLength, "count": filterLength,
		"default": filterDefault, "d": filterDefault, "join": filterJoin,
		"lower": strFilter(strings.ToLower), "upper": strFilter(strings.ToUpper),
		"title": strFilter(jinjaTitle), "capitalize": strFilter(capitalize),
		"string": func(_ *state, v any, _ []any, _ []kwarg) (any, error) { return str(v), nil },
		"safe":   func(_ *state, v any, _ []any, _ []kwarg) (any, error) { return v, nil },
		"escape": strFilter(html.EscapeString), "e": strFilter(html.EscapeString),
		"replace": filterReplace, "indent": filterIndent, "wordcount": filterWordcount,
		"first": filterFirst, "last": filterLast, "list": filterList, "reverse": filterReverse,
		"items": filterItems, "dictsort": filterDictsort, "sort": filterSort, "unique": filterUnique,
		"select": selectFilter(true, false), "reject": selectFilter(false, false),
		"selectattr": selectFilter(true, true), "rejectattr": selectFilter(false, true),
		"map": filterMap, "attr": filterAttr, "sum": filterSum, "min": minMax(-1), "max": minMax(1),
		"int": filterInt, "float": filterFloat, "abs": filterAbs, "round": filterRound,
		"format": func(s *state, v any, args []any, _ []kwarg) (any, error) { return s.percent(str(v), args) },
		"batch":  filterBatch,
	}
}

func (s *state) applyFilter(fc filterCall, v any, f *frame) (any, error) {
	args, kw, err := s.args(fc.args, f)
	if err != nil {
		return nil, err
	}
	return s.filter(fc.name, v, args, kw)
}

func (s *state) filter(name string, v any, args []any, kw []kwarg) (any, error) {
	fn, ok := filters[name]
	if !ok {
		return nil, fmt.Errorf("no filter named '%s'", name)
	}
	out, err := fn(s, v, args, kw)
	if err != nil {
		return nil, fmt.Errorf("filter %s: %w", name, err)
	}
	if o, ok := out.(string); ok {
		if err := s.grow(len(o)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func strFilter(f func(string) string) filterFunc {
	return func(_ *state, v any, _ []any, _ []kwarg) (any, error) { return f(str(v)), nil }
}

// jinjaTitle is Jinja's title filter: words start after spaces, dashes
// and opening brackets (unlike str.title, "it's" stays "It's").
func jinjaTitle(r string) string {
	start := true
	return strings.Map(func(c rune) rune {
		defer func() { start = unicode.IsSpace(c) || strings.ContainsRune("-({[<", c) }()
		if start {
			return unicode.ToTitle(c)
		}
		return unicode.ToLower(c)
	}, r)
}

func filterToJSON(s *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("tojson", args, kw, "indent", "ensure_ascii", "separators", "sort_keys")
	if err != nil {
		return nil, err
	}
	o := jsonOpts{itemSep: ", ", keySep: ": ", ensureASCII: truthy(a[1]), sortKeys: truthy(a[3])}
	switch in := a[0].(type) {
	case undefined, nil:
	case string:
		o.indent = &in
	default:
		n, ok := integer(in)
		if !ok || n > 64 {
			return nil, fmt.Errorf("indent must be an integer up to 64 or a string")
		}
		ind := strings.Repeat(" ", int(max(n, 0)))
		o.indent, o.itemSep = &ind, ","
	}
	if _, ok := a[0].(string); ok {
		o.itemSep = ","
	}
	if sep, ok := a[2].(*List); ok {
		if len(sep.Items) != 2 {
			return nil, fmt.Errorf("separators must be a pair of strings")
		}
		o.itemSep, o.keySep = str(sep.Items[0]), str(sep.Items[1])
	}
	var b strings.Builder
	if err := toJSON(&b, v, &o, 0); err != nil {
		return nil, err
	}
	return b.String(), nil
}

func filterFromJSON(_ *state, v any, _ []any, _ []kwarg) (any, error) {
	text, err := strArg(v, "from_json input")
	if err != nil {
		return nil, err
	}
	return ParseJSON([]byte(text))
}

func filterTrim(_ *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("trim", args, kw, "chars")
	if err != nil {
		return nil, err
	}
	f, err := stripper(a[0])
	if err != nil {
		return nil, err
	}
	return strings.TrimFunc(str(v), f), nil
}

func filterLength(_ *state, v any, _ []any, _ []kwarg) (any, error) {
	n, err := length(v)
	return int64(n), err
}

func filterDefault(_ *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("default", args, kw, "default_value", "boolean")
	if err != nil {
		return nil, err
	}
	if isUndefined(v) || truthy(a[1]) && !truthy(v) {
		if isUndefined(a[0]) {
			return "", nil
		}
		return a[0], nil
	}
	return v, nil
}

func filterJoin(s *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("join", args, kw, "d", "attribute")
	if err != nil {
		return nil, err
	}
	items, err := s.iter(v)
	if err != nil {
		return nil, err
	}
	if err := s.tick(len(items)); err != nil {
		return nil, err
	}
	parts := make([]string, len(items))
	for i, it := range items {
		if !isUndefined(a[1]) {
			if it, err = getAttr(it, str(a[1])); err != nil {
				return nil, err
			}
		}
		parts[i] = str(it)
	}
	sep := ""
	if !isUndefined(a[0]) {
		sep = str(a[0])
	}
	return s.join(parts, sep)
}

func filterReplace(s *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("replace", args, kw, "old", "new", "count")
	if err != nil {
		return nil, err
	}
	return s.replace(str(v), str(a[0]), str(a[1]), a[2])
}

// filterIndent is Jinja's indent(width=4, first=False, blank=False).
func filterIndent(s *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("indent", args, kw, "width", "first", "blank")
	if err != nil {
		return nil, err
	}
	ind := "    "
	switch w := a[0].(type) {
	case string:
		ind = w
	case undefined:
	default:
		n, ok := integer(w)
		if !ok || n > 1024 {
			return nil, fmt.Errorf("width must be an integer up to 1024 or a string")
		}
		ind = strings.Repeat(" ", int(max(n, 0)))
	}
	lines := strings.Split(str(v), "\n")
	if err := s.grow(len(str(v)) + len(lines)*len(ind)); err != nil {
		return nil, err
	}
	for i := range lines {
		if i == 0 && truthy(a[1]) || i > 0 && (lines[i] != "" || truthy(a[2])) {
			lines[i] = ind + lines[i]
		}
	}
	return strings.Join(lines, "\n"), nil
}

func filterWordcount(_ *state, v any, _ []any, _ []kwarg) (any, error) {
	return int64(len(strings.FieldsFunc(str(v), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' }))), nil
}

func filterFirst(s *state, v any, _ []any, _ []kwarg) (any, error) {
	items, err := s.iter(v)
	if err != nil || len(items) == 0 {
		return undefined{name: "first"}, err
	}
	return items[0], nil
}

func filterLast(s *state, v any, _ []any, _ []kwarg) (any, error) {
	items, err := s.iter(v)
	if err != nil || len(items) == 0 {
		return undefined{name: "last"}, err
	}
	return items[len(items)-1], nil
}

func filterList(s *state, v any, _ []any, _ []kwarg) (any, error) {
	items, err := s.iter(v)
	return &List{Items: append([]any{}, items...)}, err
}

func filterReverse(s *state, v any, _ []any, _ []kwarg) (any, error) {
	if sv, ok := v.(string); ok {
		rs := []rune(sv)
		for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
			rs[i], rs[j] = rs[j], rs[i]
		}
		return string(rs), nil
	}
	items, err := s.iter(v)
	if err != nil {
		return nil, err
	}
	out := &List{Items: make([]any, len(items))}
	for i, it := range items {
		out.Items[len(items)-1-i] = it
	}
	return out, nil
}

func filterItems(s *state, v any, _ []any, _ []kwarg) (any, error) {
	switch d := v.(type) {
	case undefined:
		return &List{}, nil
	case *Dict:
		return s.dictMethod(d, "items", nil, nil)
	}
	return nil, fmt.Errorf("can only get item pairs from a mapping")
}

func filterAttr(_ *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("attr", args, kw, "name")
	if err != nil {
		return nil, err
	}
	return getAttr(v, str(a[0]))
}

func filterInt(_ *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("int", args, kw, "default", "base")
	if err != nil {
		return nil, err
	}
	def := any(int64(0))
	if !isUndefined(a[0]) {
		def = a[0]
	}
	switch x := v.(type) {
	case int64:
		return x, nil
	case bool:
		n, _ := integer(x)
		return n, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return def, nil
		}
		return int64(x), nil
	case string:
		t := strings.TrimSpace(x)
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			return n, nil
		}
		if f, err := strconv.ParseFloat(t, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return int64(f), nil
		}
	}
	return def, nil
}

func filterFloat(_ *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("float", args, kw, "default")
	if err != nil {
		return nil, err
	}
	if n, ok := number(v); ok {
		return n, nil
	}
	if x, ok := v.(string); ok {
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			return f, nil
		}
	}
	if isUndefined(a[0]) {
		return 0.0, nil
	}
	return a[0], nil
}

func filterAbs(_ *state, v any, _ []any, _ []kwarg) (any, error) {
	switch x := v.(type) {
	case int64:
		if x < 0 {
			return -x, nil
		}
		return x, nil
	case float64:
		return math.Abs(x), nil
	}
	return nil, fmt.Errorf("bad operand type for abs(): '%s'", typeName(v))
}

func filterRound(_ *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("round", args, kw, "precision", "method")
	if err != nil {
		return nil, err
	}
	n, ok := number(v)
	if !ok {
		return nil, fmt.Errorf("round of %s", typeName(v))
	}
	p, _ := integer(a[0])
	p = max(min(p, 15), -15)
	scale := math.Pow(10, float64(p))
	switch str(a[1]) {
	case "ceil":
		return math.Ceil(n*scale) / scale, nil
	case "floor":
		return math.Floor(n*scale) / scale, nil
	}
	return math.Round(n*scale) / scale, nil
}

func filterBatch(s *state, v any, args []any, kw []kwarg) (any, error) {
	a, err := bind("batch", args, kw, "linecount", "fill_with")
	if err != nil {
		return nil, err
	}
	n, ok := integer(a[0])
	if !ok || n <= 0 {
		return nil, fmt.Errorf("linecount must be a positive integer")
	}
	items, err := s.iter(v)
	if err != nil {
		return nil, err
	}
	out := &List{}
	for i := 0; i < len(items); i += int(n) {
		row := &List{Items: append([]any{}, items[i:min(i+int(n), len(items))]...)}
		for !isUndefined(a[1]) && int64(len(row.Items)) < n {
			row.Items = append(row.Items, a[1])
		}
		out.Items = append(out.Items, row)
	}
	return out, s.tick(len(items))
}
