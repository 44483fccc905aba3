package jinja

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxNesting bounds how deep values are walked (JSON in and out, repr,
// equality): a template can build a list that holds itself.
const maxNesting = 1000

// ParseJSON decodes JSON text into template values as Python's
// json.loads does: objects keep their key order, integers stay
// integers.
func ParseJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJSON(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("extra data after JSON value")
	}
	return v, nil
}

func decodeJSON(dec *json.Decoder, depth int) (any, error) {
	if depth > maxNesting {
		return nil, fmt.Errorf("JSON nested more than %d deep", maxNesting)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '[':
			l := &List{}
			for dec.More() {
				v, err := decodeJSON(dec, depth+1)
				if err != nil {
					return nil, err
				}
				l.Items = append(l.Items, v)
			}
			_, err := dec.Token()
			return l, err
		case '{':
			d := NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := k.(string)
				if !ok {
					return nil, fmt.Errorf("JSON object key is not a string")
				}
				v, err := decodeJSON(dec, depth+1)
				if err != nil {
					return nil, err
				}
				d.Set(key, v)
			}
			_, err := dec.Token()
			return d, err
		}
		return nil, fmt.Errorf("unexpected %v in JSON", t)
	case json.Number:
		if !strings.ContainsAny(string(t), ".eE") {
			if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
				return i, nil
			}
		}
		return strconv.ParseFloat(string(t), 64)
	}
	return tok, nil // string, bool or nil
}

// jsonOpts are json.dumps's arguments that Hugging Face's tojson passes
// on: indent (nil for none), separators, ensure_ascii (off by default,
// unlike json.dumps) and sort_keys.
type jsonOpts struct {
	indent      *string
	itemSep     string
	keySep      string
	ensureASCII bool
	sortKeys    bool
}

func toJSON(b *strings.Builder, v any, o *jsonOpts, depth int) error {
	if depth > maxNesting {
		return fmt.Errorf("circular reference or nesting over %d in tojson", maxNesting)
	}
	if b.Len() > maxStringBytes {
		return fmt.Errorf("%w: tojson output over %d bytes", ErrLimit, maxStringBytes)
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(pyFloat(x))
		}
	case string:
		writeJSONString(b, x, o.ensureASCII)
	case *List:
		if len(x.Items) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, e := range x.Items {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, depth+1)
			if err := toJSON(b, e, o, depth+1); err != nil {
				return err
			}
		}
		o.newline(b, depth)
		b.WriteByte(']')
	case *Dict:
		if x.Len() == 0 {
			b.WriteString("{}")
			return nil
		}
		keys := x.keys
		if o.sortKeys {
			keys = slices.Sorted(slices.Values(keys))
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			o.newline(b, depth+1)
			writeJSONString(b, jsonKey(x.keyValue(k)), o.ensureASCII)
			b.WriteString(o.keySep)
			if err := toJSON(b, x.m[k], o, depth+1); err != nil {
				return err
			}
		}
		o.newline(b, depth)
		b.WriteByte('}')
	default:
		return fmt.Errorf("object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

func (o *jsonOpts) newline(b *strings.Builder, depth int) {
	if o.indent == nil {
		return
	}
	b.WriteByte('\n')
	for range depth {
		b.WriteString(*o.indent)
	}
}

// writeJSONString quotes s as Python's json module does: control
// characters escaped, everything else as is unless ensureASCII.
func writeJSONString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				fmt.Fprintf(b, `\u%04x`, r)
			case ensureASCII && r > 0x7f:
				if r > 0xffff {
					r -= 0x10000
					fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
				} else {
					fmt.Fprintf(b, `\u%04x`, r)
				}
			case r == utf8.RuneError:
				b.WriteString("\ufffd")
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// jsonKey is the text json.dumps writes for a dict key.
func jsonKey(k any) string {
	switch x := k.(type) {
	case string:
		return x
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case float64:
		var b strings.Builder
		_ = toJSON(&b, x, &jsonOpts{}, 0)
		return b.String()
	}
	return str(k)
}
