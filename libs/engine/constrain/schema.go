package constrain

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
)

// Schema limits: each error names the limit.
const (
	// MaxSchemaBytes caps a schema's JSON text.
	MaxSchemaBytes = 64 << 10
	// MaxSchemaDepth caps how deeply subschemas nest in the document, $ref
	// hops included (a recursive $ref is a cycle, not a chain: it does not
	// count past its first visit).
	MaxSchemaDepth = 64
	// MaxStates caps a grammar's nodes plus literal-trie nodes (enum
	// values and the per-position key tries of objects).
	MaxStates = 1 << 16
	// MaxProperties caps an object's properties.
	MaxProperties = 256
	// MaxAlternatives caps a union after flattening (anyOf of anyOf, type
	// arrays, $ref to either).
	MaxAlternatives = MaxHeads
)

// Keywords that only annotate: accepted and ignored. format is an
// annotation too, as draft 2020-12 makes it by default: strings are not
// checked against it.
var annotations = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "$defs": true, "definitions": true,
	"title": true, "description": true, "default": true, "examples": true,
	"deprecated": true, "readOnly": true, "writeOnly": true, "format": true,
}

// Keywords the compiler understands.
var supported = map[string]bool{
	"type": true, "enum": true, "const": true, "anyOf": true, "allOf": true, "$ref": true,
	"properties": true, "required": true, "additionalProperties": true,
	"items": true, "minItems": true, "maxItems": true,
	"minLength": true, "maxLength": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
}

var typeKeywords = map[string][]string{
	"object":  {"properties", "required", "additionalProperties"},
	"array":   {"items", "minItems", "maxItems"},
	"string":  {"minLength", "maxLength"},
	"number":  {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
	"integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
}

// CompileSchema compiles a JSON Schema (the draft 2020-12 subset OpenAI's
// strict mode uses, see the package doc) to a grammar of its instances. A
// schema outside the subset or over a limit is a *SchemaError.
func CompileSchema(schema []byte) (*Grammar, error) {
	if len(schema) > MaxSchemaBytes {
		return nil, schemaErr("#", "limit", "schema is %d bytes, over MaxSchemaBytes (%d)", len(schema), MaxSchemaBytes)
	}
	if !json.Valid(schema) {
		var v any
		err := json.Unmarshal(schema, &v)
		return nil, &SchemaError{Path: "#", Msg: "not valid JSON", Err: err}
	}
	c := &compiler{g: &Grammar{}, root: schema, memo: map[string]int32{}, anyVal: -1}
	c.g.keyStr = c.g.add(node{kind: kString, max: -1})
	root, err := c.compile("#", schema, 0)
	if err != nil {
		return nil, err
	}
	c.g.root = root
	if err := c.link(); err != nil {
		return nil, err
	}
	return c.g, nil
}

type compiler struct {
	g      *Grammar
	root   json.RawMessage
	memo   map[string]int32 // pointer -> node, so $ref cycles close
	anyVal int32
	hasRef bool
}

func (c *compiler) any() int32 {
	if c.anyVal < 0 {
		c.anyVal, _ = c.g.addAny()
	}
	return c.anyVal
}

func (c *compiler) states() error {
	if n := len(c.g.nodes) + len(c.g.lits); n > MaxStates {
		return schemaErr("#", "limit", "grammar needs over MaxStates (%d) states", MaxStates)
	}
	return nil
}

// compile returns the node of the subschema raw at pointer ptr.
func (c *compiler) compile(ptr string, raw json.RawMessage, depth int) (int32, error) {
	if id, ok := c.memo[ptr]; ok {
		return id, nil
	}
	if depth > MaxSchemaDepth {
		return 0, schemaErr(ptr, "limit", "subschemas nest deeper than MaxSchemaDepth (%d)", MaxSchemaDepth)
	}
	if err := c.states(); err != nil {
		return 0, err
	}
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return c.any(), nil
	case "false":
		return c.g.add(node{kind: kNever}), nil
	}
	o, ok, err := parseObject(raw)
	if err != nil {
		return 0, &SchemaError{Path: ptr, Msg: "malformed schema object", Err: err}
	}
	if !ok {
		return 0, schemaErr(ptr, "", "a schema must be an object or a boolean")
	}
	for _, m := range o {
		if !supported[m.key] && !annotations[m.key] {
			return 0, schemaErr(ptr, m.key, "keyword not supported")
		}
	}
	id := c.g.add(node{kind: kUnion}) // a placeholder $ref cycles can point to
	c.memo[ptr] = id
	n, err := c.build(ptr, o, depth)
	if err != nil {
		return 0, err
	}
	c.g.nodes[id] = n
	return id, nil
}

// only fails unless o has nothing but annotations and the allowed keys.
func only(ptr string, o object, what string, allowed ...string) error {
	for _, m := range o {
		if !annotations[m.key] && !slices.Contains(allowed, m.key) {
			return schemaErr(ptr, m.key, "not supported beside %s", what)
		}
	}
	return nil
}

func (c *compiler) build(ptr string, o object, depth int) (node, error) {
	if ref, ok := o.get("$ref"); ok {
		return c.ref(ptr, o, ref, depth)
	}
	if raw, ok := o.get("anyOf"); ok {
		if err := only(ptr, o, "anyOf", "anyOf"); err != nil {
			return node{}, err
		}
		subs, ok := parseArray(raw)
		if !ok || len(subs) == 0 {
			return node{}, schemaErr(ptr, "anyOf", "must be a non-empty array of schemas")
		}
		n := node{kind: kUnion}
		for i, s := range subs {
			a, err := c.compile(join(ptr, "anyOf", strconv.Itoa(i)), s, depth+1)
			if err != nil {
				return node{}, err
			}
			n.alts = append(n.alts, a)
		}
		return n, nil
	}
	if raw, ok := o.get("allOf"); ok {
		subs, ok := parseArray(raw)
		if !ok || len(subs) != 1 {
			return node{}, schemaErr(ptr, "allOf", "only a single-schema allOf is supported")
		}
		if err := only(ptr, o, "allOf", "allOf"); err != nil {
			return node{}, err
		}
		a, err := c.compile(join(ptr, "allOf", "0"), subs[0], depth+1)
		return node{kind: kUnion, alts: []int32{a}}, err
	}
	types, err := schemaTypes(ptr, o)
	if err != nil {
		return node{}, err
	}
	_, isEnum := o.get("enum")
	_, isConst := o.get("const")
	if isEnum || isConst {
		return c.enum(ptr, o, types)
	}
	var alts []int32
	for _, t := range types {
		n, err := c.typed(ptr, o, t, depth)
		if err != nil {
			return node{}, err
		}
		if len(types) == 1 {
			return n, nil
		}
		alts = append(alts, c.g.add(n))
	}
	return node{kind: kUnion, alts: alts}, nil
}

func (c *compiler) ref(ptr string, o object, raw json.RawMessage, depth int) (node, error) {
	if err := only(ptr, o, "$ref", "$ref"); err != nil {
		return node{}, err
	}
	var ref string
	if json.Unmarshal(raw, &ref) != nil {
		return node{}, schemaErr(ptr, "$ref", "must be a string")
	}
	tptr, target, err := resolve(c.root, ref)
	if err != nil {
		return node{}, &SchemaError{Keyword: "$ref", Path: ptr, Msg: "cannot resolve " + ref + ": " + err.Error()}
	}
	c.hasRef = true
	a, err := c.compile(tptr, target, depth+1)
	return node{kind: kUnion, alts: []int32{a}}, err
}

var allTypes = []string{"object", "array", "string", "number", "integer", "boolean", "null"}

// schemaTypes lists the types a schema generates: its "type", else the
// types its keywords constrain (a schema with "properties" generates
// objects), else every type (the empty schema).
func schemaTypes(ptr string, o object) ([]string, error) {
	raw, ok := o.get("type")
	if !ok {
		var types []string
		for _, t := range []string{"object", "array", "string", "number"} {
			for _, k := range typeKeywords[t] {
				if _, ok := o.get(k); ok && !slices.Contains(types, t) {
					types = append(types, t)
				}
			}
		}
		if len(types) == 0 {
			types = allTypes
		}
		return dropInteger(types), nil
	}
	var one string
	var many []string
	switch {
	case json.Unmarshal(raw, &one) == nil:
		many = []string{one}
	case json.Unmarshal(raw, &many) == nil && len(many) > 0:
	default:
		return nil, schemaErr(ptr, "type", "must be a type name or a non-empty array of them")
	}
	for i, t := range many {
		if !slices.Contains(allTypes, t) {
			return nil, schemaErr(ptr, "type", "unknown type %q", t)
		}
		if slices.Contains(many[:i], t) {
			return nil, schemaErr(ptr, "type", "type %q listed twice", t)
		}
	}
	return dropInteger(many), nil
}

// dropInteger drops integer beside number, which already generates them.
func dropInteger(types []string) []string {
	if slices.Contains(types, "number") {
		return slices.DeleteFunc(slices.Clone(types), func(t string) bool { return t == "integer" })
	}
	return types
}

func (c *compiler) enum(ptr string, o object, types []string) (node, error) {
	if err := only(ptr, o, "enum/const", "enum", "const", "type"); err != nil {
		return node{}, err
	}
	var values []json.RawMessage
	if raw, ok := o.get("enum"); ok {
		var isArr bool
		if values, isArr = parseArray(raw); !isArr || len(values) == 0 {
			return node{}, schemaErr(ptr, "enum", "must be a non-empty array")
		}
	}
	keyword := "enum"
	if raw, ok := o.get("const"); ok {
		keyword = "const"
		if _, ok := o.get("enum"); ok {
			values = slices.DeleteFunc(values, func(v json.RawMessage) bool { return !bytes.Equal(compact(v), compact(raw)) })
		} else {
			values = []json.RawMessage{raw}
		}
	}
	var texts [][]byte
	for _, v := range values {
		t := jsonType(v)
		if slices.Contains(types, t) || t == "integer" && slices.Contains(types, "number") {
			texts = append(texts, compact(v))
		}
	}
	if len(texts) == 0 {
		return node{}, schemaErr(ptr, keyword, "no value matches the schema's type")
	}
	n := node{kind: kLiteral, lit: c.g.addLiterals(texts)}
	return n, c.states()
}

func compact(v json.RawMessage) []byte {
	var b bytes.Buffer
	_ = json.Compact(&b, v) // v came out of a valid document
	return b.Bytes()
}
