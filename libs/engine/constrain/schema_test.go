package constrain

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestSchemaOutputs feeds instances byte by byte to compiled schemas.
// Whatever the grammar accepts must also pass the reference validator;
// want says whether the grammar accepts it (it generates a subset of the
// schema's instances: properties in schema order, compact enum values).
func TestSchemaOutputs(t *testing.T) {
	t.Parallel()
	person := `{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":5},
		"age":{"type":"integer","minimum":0,"maximum":150},"tags":{"type":"array","items":{"type":"string"},"maxItems":2}},
		"required":["name","age"],"additionalProperties":false}`
	cases := []struct {
		schema string
		in     string
		want   bool
	}{
		{person, `{"name":"Al","age":30}`, true},
		{person, `{"name":"Al","age":30,"tags":["a","b"]}`, true},
		{person, `{"name":"Al","age":30,"tags":["a","b","c"]}`, false}, // maxItems
		{person, `{"age":30,"name":"Al"}`, false},                      // schema order only
		{person, `{"name":"","age":30}`, false},                        // minLength
		{person, `{"name":"Alicia","age":30}`, false},                  // maxLength
		{person, `{"name":"éé😀","age":30}`, true},                      // code points, not bytes
		{person, `{"name":"Al","age":151}`, false},
		{person, `{"name":"Al","age":-1}`, false},
		{person, `{"name":"Al","age":1.5}`, false},
		{person, `{"name":"Al"}`, false}, // required
		{person, `{"name":"Al","age":30,"x":1}`, false},
		{`{"type":"integer","minimum":-5,"exclusiveMaximum":100}`, `-5`, true},
		{`{"type":"integer","minimum":-5,"exclusiveMaximum":100}`, `-6`, false},
		{`{"type":"integer","minimum":-5,"exclusiveMaximum":100}`, `99`, true},
		{`{"type":"integer","minimum":-5,"exclusiveMaximum":100}`, `100`, false},
		{`{"type":"integer","minimum":-5,"exclusiveMaximum":100}`, `007`, false},
		{`{"type":"number","minimum":0.5,"maximum":2.25}`, `0.5`, true},
		{`{"type":"number","minimum":0.5,"maximum":2.25}`, `2.250`, true},
		{`{"type":"number","minimum":0.5,"maximum":2.25}`, `2.2501`, false},
		{`{"type":"number","minimum":0.5,"maximum":2.25}`, `0.4999`, false},
		{`{"type":"number","minimum":0.5,"maximum":2.25}`, `1`, true},
		{`{"type":"number","minimum":0.5,"maximum":2.25}`, `1e0`, false}, // no exponent when bounded
		{`{"type":"number","exclusiveMinimum":0}`, `0.000001`, true},
		{`{"type":"number","exclusiveMinimum":0}`, `0`, false},
		{`{"enum":["red","green",3,null,{"a":[1]}]}`, `"green"`, true},
		{`{"enum":["red","green",3,null,{"a":[1]}]}`, `{"a":[1]}`, true},
		{`{"enum":["red","green",3,null,{"a":[1]}]}`, `{"a": [1]}`, false}, // compact form only
		{`{"enum":["red","green",3,null,{"a":[1]}]}`, `"blue"`, false},
		{`{"enum":[1,12]}`, `1`, true},
		{`{"enum":[1,12]}`, `12`, true},
		{`{"enum":[1,12]}`, `123`, false},
		{`{"type":"string","enum":["a",1]}`, `1`, false},
		{`{"const":"x"}`, `"x"`, true},
		{`{"type":["string","null"]}`, `null`, true},
		{`{"type":["string","null"]}`, `"s"`, true},
		{`{"type":["string","null"]}`, `1`, false},
		{`{"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]}`, `"ab"`, false},
		{`{"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]}`, `7`, true},
		{`{"type":"array","minItems":2,"maxItems":3,"items":{"type":"boolean"}}`, `[true]`, false},
		{`{"type":"array","minItems":2,"maxItems":3,"items":{"type":"boolean"}}`, `[true,false]`, true},
		{`{"type":"array","minItems":2,"maxItems":3,"items":{"type":"boolean"}}`, `[true,false,true,true]`, false},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`, `{"x":1,"y":2}`, true},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`, `{"x":"1"}`, false},
		{`{"type":"object"}`, `{"x":{"y":[1,"2"]}}`, true},
		{`{"type":"object","additionalProperties":false}`, `{}`, true},
		{`{"type":"object","additionalProperties":false}`, `{"a":1}`, false},
		{`{"type":"object","properties":{"a":{"type":"null"},"b":{"type":"null"},"c":{"type":"null"}}}`, `{"b":null}`, true},
		{`{"type":"object","properties":{"a":{"type":"null"},"b":{"type":"null"},"c":{"type":"null"}}}`, `{"a":null,"c":null}`, true},
		{`{"type":"object","properties":{"a":{"type":"null"},"b":{"type":"null"}},"required":["b"]}`, `{"a":null}`, false},
		{`{"type":"object","properties":{"a":{"type":"null"}},"required":["a","z"]}`, `{"a":null,"z":[1]}`, true},
		{`{"type":"object","properties":{"a":{"type":"null"}},"required":["a","z"]}`, `{"a":null}`, false},
		{`{"type":"object","properties":{"k\"ey":{"type":"null"}},"required":["k\"ey"]}`, `{"k\"ey":null}`, true},
		{tree, `{"value":1,"children":[{"value":2},{"value":3,"children":[]}]}`, true},
		{tree, `{"value":1,"children":[{"children":[]}]}`, false},
		{`{"$defs":{"s":{"type":"string"}},"type":"array","items":{"$ref":"#/$defs/s"}}`, `["a","b"]`, true},
		{`{"$defs":{"s":{"type":"string"}},"type":"array","items":{"$ref":"#/$defs/s"}}`, `[1]`, false},
		{`{"type":"string","format":"date-time"}`, `"not a date"`, true}, // format is an annotation
		{`{"type":"string"}`, `"\ud800"`, false},                         // no lone surrogates
		{`true`, `[1,{"a":null}]`, true},
		{`{}`, `"x"`, true},
	}
	for _, c := range cases {
		g, err := CompileSchema([]byte(c.schema))
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		got := feed(t, g.Matcher(byteVocab()), []byte(c.in))
		if got != c.want {
			t.Errorf("schema %s: %s: accepted %v, want %v", c.schema, c.in, got, c.want)
		}
		if ref := conforms(reference(t, c.schema), []byte(c.in)); got && ref != nil {
			t.Errorf("schema %s: %s: accepted, but the reference validator rejects it: %v", c.schema, c.in, ref)
		}
	}
}

const tree = `{"$defs":{"node":{"type":"object","properties":{"value":{"type":"integer"},
	"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["value"],"additionalProperties":false}},
	"$ref":"#/$defs/node"}`

// TestSchemaErrors checks that what the subset leaves out is refused with
// the keyword and the path of the subschema it sits in.
func TestSchemaErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		schema, keyword, path string
	}{
		{`{"type":"string","pattern":"^a"}`, "pattern", "#"},
		{`{"type":"object","properties":{"a":{"type":"string","pattern":"x"}}}`, "pattern", "#/properties/a"},
		{`{"type":"object","patternProperties":{"^a":{}}}`, "patternProperties", "#"},
		{`{"oneOf":[{"type":"string"}]}`, "oneOf", "#"},
		{`{"not":{"type":"string"}}`, "not", "#"},
		{`{"if":{},"then":{}}`, "if", "#"},
		{`{"type":"object","dependentSchemas":{}}`, "dependentSchemas", "#"},
		{`{"type":"array","uniqueItems":true}`, "uniqueItems", "#"},
		{`{"type":"array","prefixItems":[{}]}`, "prefixItems", "#"},
		{`{"type":"array","items":[{}]}`, "items", "#"},
		{`{"type":"number","multipleOf":2}`, "multipleOf", "#"},
		{`{"type":"object","minProperties":1}`, "minProperties", "#"},
		{`{"type":"object","properties":{"a/b":{"anyOf":[{"type":"string"},{"type":"null","nullable":true}]}}}`, "nullable", "#/properties/a~1b/anyOf/1"},
		{`{"type":"strung"}`, "type", "#"},
		{`{"type":["string","string"]}`, "type", "#"},
		{`{"type":"string","minLength":-1}`, "minLength", "#"},
		{`{"type":"string","minLength":3,"maxLength":2}`, "minLength", "#"},
		{`{"type":"array","minItems":1.5}`, "minItems", "#"},
		{`{"type":"integer","minimum":3,"maximum":2}`, "minimum", "#"},
		{`{"type":"integer","exclusiveMinimum":true}`, "exclusiveMinimum", "#"},
		{`{"type":"integer","minimum":0.5,"maximum":0.9}`, "minimum", "#"},
		{`{"$ref":"http://example.com/s.json"}`, "$ref", "#"},
		{`{"$ref":"#/$defs/missing"}`, "$ref", "#"},
		{`{"$ref":"#anchor"}`, "$ref", "#"},
		{`{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "$ref", "#"},
		{`{"$defs":{"n":{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"required":["n"]}},"$ref":"#/$defs/n"}`, "$ref", "#"},
		{`{"$ref":"#/$defs/s","type":"string","$defs":{"s":{}}}`, "type", "#"},
		{`{"anyOf":[{"type":"string"}],"type":"string"}`, "type", "#"},
		{`{"anyOf":[]}`, "anyOf", "#"},
		{`{"allOf":[{"type":"string"},{"minLength":1}]}`, "allOf", "#"},
		{`{"enum":[]}`, "enum", "#"},
		{`{"enum":["a"],"minLength":1}`, "minLength", "#"},
		{`{"type":"integer","enum":["a"]}`, "enum", "#"},
		{`{"type":"object","properties":{"a":{}},"required":["b"],"additionalProperties":false}`, "required", "#"},
		{`{"type":"object","required":["a","a"]}`, "required", "#"},
		{`false`, "", "#"},
		{`[]`, "", "#"},
		{`{"type":"string"`, "", "#"},
		{`{"a":1,"a":2}`, "", "#"},
		{nested(MaxDepth + 1), "limit", "#"},
		{nested(MaxSchemaDepth + 1), "limit", "#/properties/a" + strings.Repeat("/properties/a", MaxSchemaDepth-1)},
		{`{"description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`, "limit", "#"},
		{manyProps(MaxProperties+1, "p"), "properties", "#"},
		{manyAlts(MaxAlternatives + 1), "anyOf", "#"},
		{manyProps(200, strings.Repeat("k", 20)), "limit", "#"}, // key tries: quadratic in optional properties
	}
	for _, c := range cases {
		_, err := CompileSchema([]byte(c.schema))
		var se *SchemaError
		if !errors.As(err, &se) {
			t.Errorf("%.80s: error %v, want a *SchemaError", c.schema, err)
			continue
		}
		if se.Keyword != c.keyword || !strings.HasPrefix(se.Path, c.path) {
			t.Errorf("%.80s: keyword %q at %q (%v), want %q at %q", c.schema, se.Keyword, se.Path, err, c.keyword, c.path)
		}
		if !strings.Contains(err.Error(), se.Msg) || se.Msg == "" {
			t.Errorf("%.80s: message %q missing from %q", c.schema, se.Msg, err)
		}
	}
}

// nested is an object schema whose only instance nests depth objects.
func nested(depth int) string {
	s := `{"type":"null"}`
	for range depth {
		s = `{"type":"object","properties":{"a":` + s + `},"required":["a"]}`
	}
	return s
}

func manyProps(n int, prefix string) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"%d%s":{"type":"null"}`, i, prefix)
	}
	b.WriteString("}}")
	return b.String()
}

func manyAlts(n int) string {
	var b strings.Builder
	b.WriteString(`{"anyOf":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"const":%d}`, i)
	}
	b.WriteString("]}")
	return b.String()
}
