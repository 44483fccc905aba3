package constrain

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// schemaGen builds a random schema inside the supported subset from a
// stream of choices (zeros once the stream runs out), so that fuzzing and
// seeded tests reach schemas a byte-level mutation of JSON rarely would.
type schemaGen struct {
	choices []byte
	refs    bool // whether #/$defs/d exists
}

func (g *schemaGen) next(n int) int {
	if len(g.choices) == 0 {
		return 0
	}
	c := g.choices[0]
	g.choices = g.choices[1:]
	return int(c) % n
}

// schema is a random document: a root schema and a recursive definition.
func (g *schemaGen) schema() string {
	g.refs = true
	def := fmt.Sprintf(`{"type":"object","properties":{"v":%s,"next":{"anyOf":[{"$ref":"#/$defs/d"},{"type":"null"}]}},"required":["v"%s]}`,
		g.value(2), []string{"", `,"next"`}[g.next(2)])
	root := g.value(0)
	if root == "{}" {
		return fmt.Sprintf(`{"$defs":{"d":%s}}`, def)
	}
	return fmt.Sprintf(`{"$defs":{"d":%s},%s`, def, strings.TrimPrefix(root, "{"))
}

func (g *schemaGen) value(depth int) string {
	k := g.next(12)
	if depth >= 4 && k >= 6 {
		k %= 6
	}
	switch k {
	case 0:
		lo := g.next(4)
		return fmt.Sprintf(`{"type":"string","minLength":%d,"maxLength":%d}`, lo, lo+g.next(6))
	case 1:
		lo := g.next(2000) - 1000
		return fmt.Sprintf(`{"type":"integer","minimum":%d,"maximum":%d}`, lo, lo+g.next(3)*g.next(500))
	case 2:
		return fmt.Sprintf(`{"type":"number","exclusiveMinimum":%d.%d,"maximum":%d}`, g.next(5)-2, g.next(100), g.next(10)+3)
	case 3:
		return `{"type":["boolean","null"],"description":"x"}`
	case 4:
		return []string{`{"enum":["a","b c",1,2.5,null,true,{"k":[1]}]}`, `{"const":"fixed"}`, `{"type":"string","enum":["x","y"]}`, `{"type":"integer"}`, `{"type":"number"}`, `{}`}[g.next(6)]
	case 5:
		if g.refs && g.next(2) == 0 {
			return `{"anyOf":[{"type":"null"},{"$ref":"#/$defs/d"}]}` // always a way out
		}
		return `{"type":"string","format":"date"}`
	case 6, 7:
		n := 1 + g.next(4)
		var props, req []string
		for i := range n {
			props = append(props, fmt.Sprintf(`"p%d":%s`, i, g.value(depth+1)))
			if g.next(2) == 0 {
				req = append(req, fmt.Sprintf(`"p%d"`, i))
			}
		}
		addl := []string{``, `,"additionalProperties":false`}[g.next(2)]
		return fmt.Sprintf(`{"type":"object","properties":{%s},"required":[%s]%s}`, strings.Join(props, ","), strings.Join(req, ","), addl)
	case 8:
		lo := g.next(3)
		return fmt.Sprintf(`{"type":"array","items":%s,"minItems":%d,"maxItems":%d}`, g.value(depth+1), lo, lo+g.next(3))
	case 9:
		return fmt.Sprintf(`{"anyOf":[%s,%s]}`, g.value(depth+1), g.value(depth+1))
	case 10:
		return fmt.Sprintf(`{"type":"object","additionalProperties":%s}`, g.value(depth+1))
	}
	return fmt.Sprintf(`{"type":"array","items":%s}`, g.value(depth+1))
}

// checkGenerated compiles a generated schema and checks walks over v
// against the reference validator, plus the promise from a random state.
func checkGenerated(t *testing.T, schema string, v *Vocab, rng *rand.Rand) {
	t.Helper()
	g, err := CompileSchema([]byte(schema))
	if err != nil {
		t.Fatalf("generated schema %s: %v", schema, err)
	}
	ref := reference(t, schema)
	least := g.MinTokens(v)
	for _, b := range []int{least, least + 30, least + 150} {
		out, done := walk(t, g.Matcher(v), v, b, rng)
		if !done {
			t.Fatalf("schema %s: budget %d: incomplete %q", schema, b, out)
		}
		if err := conforms(ref, out); err != nil {
			t.Fatalf("schema %s: budget %d: %q: %v", schema, b, out, err)
		}
	}
}

// TestGeneratedSchemas runs seeded random schemas of the subset through
// the one-byte vocabulary (where budgets are tight) and stories260K's.
func TestGeneratedSchemas(t *testing.T) {
	t.Parallel()
	bv := byteVocab()
	sv := storiesVocab(t)
	for seed := range 150 {
		rng := rand.New(rand.NewPCG(uint64(seed), 13))
		choices := make([]byte, 64)
		for i := range choices {
			choices[i] = byte(rng.Uint32())
		}
		schema := (&schemaGen{choices: choices}).schema()
		checkGenerated(t, schema, bv, rng)
		checkGenerated(t, schema, sv, rng)
	}
}
