package constrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// member is one key of a schema object, in document order: property
// order is the order outputs are generated in, which a map would lose.
type member struct {
	key string
	val json.RawMessage
}

type object []member

func (o object) get(key string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.key == key {
			return m.val, true
		}
	}
	return nil, false
}

// parseObject decodes raw as an object, keeping key order; ok is false
// when raw is not an object.
func parseObject(raw json.RawMessage) (o object, ok bool, err error) {
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return nil, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, false, err
	}
	seen := map[string]bool{}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, false, err
		}
		key := k.(string) // a decoder yields only string keys inside an object
		if seen[key] {
			return nil, false, fmt.Errorf("duplicate key %q", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false, err
		}
		o = append(o, member{key: key, val: v})
	}
	return o, true, nil
}

func parseArray(raw json.RawMessage) ([]json.RawMessage, bool) {
	var a []json.RawMessage
	if t := bytes.TrimLeft(raw, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		return nil, false
	}
	if json.Unmarshal(raw, &a) != nil {
		return nil, false
	}
	return a, true
}

// jsonType is the JSON type of a valid value's text ("integer" for an
// integral number, as JSON Schema counts 1.0 an integer).
func jsonType(raw []byte) string {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 {
		return ""
	}
	switch t[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	if r, ok := parseRat(t); ok && r.IsInt() {
		return "integer"
	}
	return "number"
}

// quote is s as a JSON string the way outputs spell keys: encoding/json's
// escapes without the HTML ones.
func quote(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// ptrToken escapes one JSON pointer token.
func ptrToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func join(ptr string, tokens ...string) string {
	for _, t := range tokens {
		ptr += "/" + ptrToken(t)
	}
	return ptr
}

// resolve follows a local reference ("#", "#/$defs/x") from root and
// returns the canonical pointer of its target and the target.
func resolve(root json.RawMessage, ref string) (string, json.RawMessage, error) {
	if !strings.HasPrefix(ref, "#") {
		return "", nil, fmt.Errorf("only local references (#/...) are supported")
	}
	frag, err := url.PathUnescape(ref[1:])
	if err != nil {
		return "", nil, fmt.Errorf("bad escape: %w", err)
	}
	if frag == "" {
		return "#", root, nil
	}
	if frag[0] != '/' {
		return "", nil, fmt.Errorf("only JSON pointers are supported, not anchors")
	}
	cur, ptr := root, "#"
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		ptr = join(ptr, tok)
		if o, ok, _ := parseObject(cur); ok {
			if cur, ok = o.get(tok); !ok {
				return "", nil, fmt.Errorf("%s does not exist", ptr)
			}
			continue
		}
		a, ok := parseArray(cur)
		i, err := strconv.Atoi(tok)
		if !ok || err != nil || i < 0 || i >= len(a) {
			return "", nil, fmt.Errorf("%s does not exist", ptr)
		}
		cur = a[i]
	}
	return ptr, cur, nil
}
