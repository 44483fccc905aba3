package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// A tool's parameters are a JSON Schema document of their own: a local
// $ref ("#/$defs/Address", as pydantic writes them) points into that
// document. Inside the call schema the parameters sit at a JSON pointer
// below the root, so rebase moves every local reference under it. It
// walks the schema's structure, not its text, so a "$ref" inside an enum
// value or a property named "$ref" stays as it is, and it keeps the
// properties' order, which is the order the engine generates them in.

// Keywords whose value is a schema, a map of names to schemas, or a list
// of schemas (draft 2020-12, plus the older items/definitions forms).
var (
	schemaKeywords = map[string]bool{
		"items": true, "additionalItems": true, "additionalProperties": true, "unevaluatedItems": true,
		"unevaluatedProperties": true, "contains": true, "propertyNames": true, "not": true,
		"if": true, "then": true, "else": true, "contentSchema": true,
	}
	schemaMapKeywords = map[string]bool{
		"properties": true, "patternProperties": true, "$defs": true, "definitions": true, "dependentSchemas": true,
	}
	schemaListKeywords = map[string]bool{"anyOf": true, "allOf": true, "oneOf": true, "prefixItems": true}
	refKeywords        = map[string]bool{"$ref": true, "$dynamicRef": true}
)

// rebase returns schema, compacted, with each local reference "#..."
// made "<base>...".
func rebase(schema []byte, base string) ([]byte, error) {
	if !mayRefer(schema) {
		var out bytes.Buffer
		err := json.Compact(&out, schema)
		return out.Bytes(), err
	}
	r := &rebaser{dec: json.NewDecoder(bytes.NewReader(schema)), base: base}
	r.dec.UseNumber()
	if err := r.schema(); err != nil {
		return nil, err
	}
	return r.out.Bytes(), nil
}

// mayRefer reports whether schema may hold a reference: walking it costs
// ten times a compaction, and most tools' parameters have none. A key
// spelled with \u escapes is a reference or not only once decoded.
func mayRefer(schema []byte) bool {
	return bytes.Contains(schema, []byte("$ref")) || bytes.Contains(schema, []byte("$dynamicRef")) || bytes.Contains(schema, []byte(`\u`))
}

type rebaser struct {
	dec  *json.Decoder
	out  bytes.Buffer
	base string
}

var errSchemaShape = errors.New("malformed schema")

// schema copies one schema: an object walked keyword by keyword, or a
// boolean.
func (r *rebaser) schema() error {
	tok, err := r.dec.Token()
	if err != nil {
		return err
	}
	return r.schemaFrom(tok)
}

// schemaFrom copies the schema that starts with tok. A value of the wrong
// kind is copied as it is, for the compiler to name.
func (r *rebaser) schemaFrom(tok json.Token) error {
	switch tok {
	case json.Delim('{'):
	case json.Delim('['): // a list keyword's value, or the tuple form of items
		return r.list()
	default:
		return r.scalar(tok)
	}
	r.out.WriteByte('{')
	for first := true; r.dec.More(); first = false {
		key, err := r.key(first)
		if err != nil {
			return err
		}
		switch {
		case refKeywords[key]:
			err = r.ref()
		case schemaKeywords[key]:
			err = r.schema()
		case schemaMapKeywords[key]:
			err = r.schemaMap()
		case schemaListKeywords[key]:
			err = r.schema()
		default:
			err = r.data()
		}
		if err != nil {
			return err
		}
	}
	return r.close('}')
}

// schemaMap copies an object of names to schemas.
func (r *rebaser) schemaMap() error {
	tok, err := r.dec.Token()
	if err != nil {
		return err
	}
	if tok != json.Delim('{') {
		return r.schemaFrom(tok)
	}
	r.out.WriteByte('{')
	for first := true; r.dec.More(); first = false {
		if _, err := r.key(first); err != nil {
			return err
		}
		if err := r.schema(); err != nil {
			return err
		}
	}
	return r.close('}')
}

// list copies an array of schemas whose '[' was read.
func (r *rebaser) list() error {
	r.out.WriteByte('[')
	for first := true; r.dec.More(); first = false {
		if !first {
			r.out.WriteByte(',')
		}
		if err := r.schema(); err != nil {
			return err
		}
	}
	return r.close(']')
}

// ref copies a reference, rebased when it is local.
func (r *rebaser) ref() error {
	var raw json.RawMessage
	if err := r.dec.Decode(&raw); err != nil {
		return err
	}
	var ref string
	if local := json.Unmarshal(raw, &ref) == nil && strings.HasPrefix(ref, "#"); !local {
		return json.Compact(&r.out, raw) // the compiler judges it
	}
	return r.str(r.base + ref[1:])
}

// data copies a value that is not a schema (enum, const, required, ...)
// as its text.
func (r *rebaser) data() error {
	var raw json.RawMessage
	if err := r.dec.Decode(&raw); err != nil {
		return err
	}
	return json.Compact(&r.out, raw)
}

func (r *rebaser) key(first bool) (string, error) {
	tok, err := r.dec.Token()
	if err != nil {
		return "", err
	}
	key, ok := tok.(string)
	if !ok {
		return "", errSchemaShape
	}
	if !first {
		r.out.WriteByte(',')
	}
	if err := r.str(key); err != nil {
		return "", err
	}
	r.out.WriteByte(':')
	return key, nil
}

func (r *rebaser) scalar(tok json.Token) error {
	switch v := tok.(type) {
	case json.Number:
		r.out.WriteString(v.String())
		return nil
	case string:
		return r.str(v)
	case json.Delim:
		return fmt.Errorf("%w: unexpected %v", errSchemaShape, v)
	}
	b, err := json.Marshal(tok)
	if err != nil {
		return err
	}
	r.out.Write(b)
	return nil
}

// str writes s as a JSON string, without encoding/json's HTML escapes.
func (r *rebaser) str(s string) error {
	enc := json.NewEncoder(&r.out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return err
	}
	r.out.Truncate(r.out.Len() - 1) // Encode's newline
	return nil
}

func (r *rebaser) expect(d json.Delim) error {
	tok, err := r.dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return fmt.Errorf("%w: want %v, got %v", errSchemaShape, d, tok)
	}
	return nil
}

func (r *rebaser) close(d json.Delim) error {
	if err := r.expect(d); err != nil {
		return err
	}
	r.out.WriteString(d.String())
	return nil
}
