package jinja

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Values a template sees are dynamically typed, as in Python: nil (None),
// bool, int64, float64, string, *List, *Dict, and the engine's own
// undefined, callables and loop objects. Vars handed to Render may also
// hold int, float32/64 and []any or map[string]any (see From).

// List is a Python list; templates may append to it.
type List struct {
	Items []any
}

// NewList returns a list of items (converted as From does).
func NewList(items ...any) *List {
	for i, it := range items {
		items[i] = From(it)
	}
	return &List{Items: items}
}

// Dict is a Python dict, in insertion order (tojson and items() keep
// it, as Python does). Keys are strings; the few templates that key a
// dict literal by numbers ({1024: 256}) get those keys back as numbers.
type Dict struct {
	keys []string
	m    map[string]any
	// raw holds the original key of each non-string key, by its
	// encoding in keys.
	raw map[string]any
	// ns marks a namespace(): the one object templates may assign
	// attributes to.
	ns bool
}

// dictKey encodes a key value; strings are themselves, None, bools and
// numbers (1 and 1.0 alike, as Python hashes them) an encoding no text
// key has.
func dictKey(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case nil:
		return "\x00None", nil
	case bool, int64:
		n, _ := integer(x)
		return "\x00" + strconv.FormatInt(n, 10), nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e18 {
			return "\x00" + strconv.FormatInt(int64(x), 10), nil
		}
		return "\x00" + pyFloat(x), nil
	}
	return "", fmt.Errorf("unhashable type: '%s'", typeName(v))
}

// setKey sets the value of any hashable key.
func (d *Dict) setKey(key, v any) error {
	k, err := dictKey(key)
	if err != nil {
		return err
	}
	if _, ok := key.(string); !ok {
		if d.raw == nil {
			d.raw = map[string]any{}
		}
		if _, seen := d.m[k]; !seen {
			d.raw[k] = key
		}
	}
	d.Set(k, v)
	return nil
}

// keyValue is the key a template sees for the encoded key k.
func (d *Dict) keyValue(k string) any {
	if v, ok := d.raw[k]; ok {
		return v
	}
	return k
}

// update copies src's entries into d.
func (d *Dict) update(src *Dict) {
	for _, k := range src.keys {
		if raw, ok := src.raw[k]; ok {
			_ = d.setKey(raw, src.m[k])
			continue
		}
		d.Set(k, src.m[k])
	}
}

// NewDict returns an empty dict.
func NewDict() *Dict { return &Dict{m: map[string]any{}} }

// Set sets key to v (converted as From does), keeping the key's first
// position.
func (d *Dict) Set(key string, v any) *Dict {
	if _, ok := d.m[key]; !ok {
		d.keys = append(d.keys, key)
	}
	d.m[key] = From(v)
	return d
}

// Get returns the value of key.
func (d *Dict) Get(key string) (any, bool) {
	v, ok := d.m[key]
	return v, ok
}

// Len is the number of keys.
func (d *Dict) Len() int { return len(d.keys) }

// Keys are the keys in insertion order.
func (d *Dict) Keys() []string { return d.keys }

func (d *Dict) del(key string) {
	if _, ok := d.m[key]; !ok {
		return
	}
	delete(d.m, key)
	for i, k := range d.keys {
		if k == key {
			d.keys = append(d.keys[:i:i], d.keys[i+1:]...)
			break
		}
	}
}

// undefined is a name or attribute that does not exist. Like Jinja's
// default Undefined it prints as "", is false, iterates as empty, and is
// an error only when looked into (an attribute or item of it).
type undefined struct{ name string }

// callable is anything a template can call.
type callable interface {
	call(s *state, args []any, kw []kwarg) (any, error)
	funcName() string
}

// kwarg is one keyword argument of a call, in call order.
type kwarg struct {
	name string
	val  any
}

// From converts plain Go data into template values: map[string]any
// becomes a Dict with sorted keys (a Go map has no order; build a Dict
// to keep one), []any and []string a List, other ints int64, float32
// float64. Values already of this package pass through.
func From(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case uint32:
		return int64(x)
	case float32:
		return float64(x)
	case []any:
		l := &List{Items: make([]any, len(x))}
		for i, e := range x {
			l.Items[i] = From(e)
		}
		return l
	case []string:
		l := &List{Items: make([]any, len(x))}
		for i, e := range x {
			l.Items[i] = e
		}
		return l
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		d := NewDict()
		for _, k := range keys {
			d.Set(k, From(x[k]))
		}
		return d
	}
	return v
}

// typeName names v's type as Python would in an error.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case undefined:
		return "Undefined"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case *List:
		return "list"
	case *Dict:
		return "dict"
	case callable:
		return "function"
	case *loopObj:
		return "LoopContext"
	}
	return fmt.Sprintf("%T", v)
}

// str is Python's str(v), as a template prints v.
func str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case undefined:
		return ""
	}
	var b strings.Builder
	writeRepr(&b, v)
	return b.String()
}

// writeRepr writes Python's repr(v).
func writeRepr(b *strings.Builder, v any) { repr(b, v, 0) }

func repr(b *strings.Builder, v any, depth int) {
	if depth > maxNesting || b.Len() > maxStringBytes {
		b.WriteString("...")
		return
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case undefined:
		b.WriteString("")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		b.WriteString(pyFloat(x))
	case string:
		writeQuoted(b, x)
	case *List:
		b.WriteByte('[')
		for i, e := range x.Items {
			if i > 0 {
				b.WriteString(", ")
			}
			repr(b, e, depth+1)
		}
		b.WriteByte(']')
	case *Dict:
		if x.ns {
			b.WriteString("<Namespace ")
		}
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			repr(b, x.keyValue(k), depth+1)
			b.WriteString(": ")
			repr(b, x.m[k], depth+1)
		}
		b.WriteByte('}')
		if x.ns {
			b.WriteByte('>')
		}
	case callable:
		fmt.Fprintf(b, "<function %s>", x.funcName())
	case *loopObj:
		b.WriteString("<LoopContext>")
	default:
		fmt.Fprintf(b, "%v", x)
	}
}

// writeQuoted writes a Python string literal of s: single quotes unless s
// has a single quote and no double quote.
func writeQuoted(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(b, `\x%02x`, r)
		case r == utf8.RuneError:
			b.WriteString(`\ufffd`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
}

// pyFloat is Python's repr of a float: the shortest digits that round
// trip, fixed-point unless the exponent is below -4 or above 15.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	sign := ""
	if s[0] == '-' {
		sign, s = "-", s[1:]
	}
	mant, expS, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expS)
	digits := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1
	switch {
	case decpt > -4 && decpt <= 16:
		switch {
		case decpt <= 0:
			return sign + "0." + strings.Repeat("0", -decpt) + digits
		case decpt >= len(digits):
			return sign + digits + strings.Repeat("0", decpt-len(digits)) + ".0"
		default:
			return sign + digits[:decpt] + "." + digits[decpt:]
		}
	default:
		m := digits[:1]
		if len(digits) > 1 {
			m += "." + digits[1:]
		}
		es := "+"
		if exp < 0 {
			es, exp = "-", -exp
		}
		return fmt.Sprintf("%s%se%s%02d", sign, m, es, exp)
	}
}
