package constrain

import (
	"math/rand/v2"
	"testing"
)

// walkSchemas are the schemas random walks generate from: the shapes
// structured output and tool calls use.
var walkSchemas = []struct{ name, schema string }{
	{"nested", `{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer"},
		"address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string","minLength":2},"zip":{"type":"string"}},
		"required":["city"],"additionalProperties":false},"email":{"type":"string"}},"required":["name","address"],"additionalProperties":false}`},
	{"arrays", `{"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","maxLength":8},"minItems":1,"maxItems":3},
		"matrix":{"type":"array","items":{"type":"array","items":{"type":"integer"},"maxItems":2},"minItems":2,"maxItems":2}},
		"required":["tags","matrix"],"additionalProperties":false}`},
	{"enums", `{"type":"object","properties":{"color":{"enum":["red","green","blue"]},"size":{"type":"string","enum":["S","M","L","XL"]},
		"misc":{"enum":[1,2.5,null,true,"x y",{"a":[1,"b"]}]},"fixed":{"const":"v1"}},"required":["color","size","misc","fixed"],"additionalProperties":false}`},
	{"tools", `{"anyOf":[
		{"type":"object","properties":{"name":{"const":"get_weather"},"arguments":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false},
		{"type":"object","properties":{"name":{"const":"get_time"},"arguments":{"type":"object","properties":{"tz":{"type":"string"}},"required":["tz"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false},
		{"type":"object","properties":{"name":{"const":"search"},"arguments":{"type":"object","properties":{"q":{"type":"string","minLength":1},"limit":{"type":"integer","minimum":1,"maximum":50}},"required":["q"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false}]}`},
	{"tree", tree},
	{"list", `{"$defs":{"cell":{"type":"object","properties":{"head":{"type":"integer"},"tail":{"anyOf":[{"$ref":"#/$defs/cell"},{"type":"null"}]}},
		"required":["head","tail"],"additionalProperties":false}},"$ref":"#/$defs/cell"}`},
	{"nullable", `{"type":"object","properties":{"a":{"type":["string","null"]},"b":{"anyOf":[{"type":"number"},{"type":"null"}]},
		"c":{"type":["integer","boolean","null"]}},"required":["a","b","c"],"additionalProperties":false}`},
	{"numbers", `{"type":"object","properties":{"count":{"type":"integer","minimum":1,"maximum":10},"offset":{"type":"integer","minimum":-1000,"maximum":-990},
		"ratio":{"type":"number","minimum":0,"exclusiveMaximum":1},"big":{"type":"integer","minimum":1000000},"any":{"type":"number"}},
		"required":["count","offset","ratio","big","any"],"additionalProperties":false}`},
	{"map", `{"type":"object","additionalProperties":{"type":"array","items":{"type":"boolean"}}}`},
	{"strict", `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"weather","type":"object",
		"properties":{"location":{"type":"string","description":"City and country"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},
		"required":["location","unit"],"additionalProperties":false}`},
	{"string", `{"type":"string","minLength":3,"maxLength":10}`},
	{"any", `true`},
}

// TestRandomWalks samples at temperature 1 from random logits through Mask
// over the stories260K vocabulary, with budgets from tight to loose:
// every walk must end complete within its budget, valid JSON that the
// reference validator accepts.
func TestRandomWalks(t *testing.T) {
	t.Parallel()
	v := storiesVocab(t)
	all := append([]struct{ name, schema string }{{"json_object", ""}}, walkSchemas...)
	for _, s := range all {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			g := JSONObject()
			ref := reference(t, `{"type":"object"}`)
			if s.schema != "" {
				var err error
				if g, err = CompileSchema([]byte(s.schema)); err != nil {
					t.Fatal(err)
				}
				ref = reference(t, s.schema)
			}
			minTok := g.MinTokens(v)
			for _, budget := range []int{max(40, minTok), 100, 300} {
				for seed := range 25 {
					rng := rand.New(rand.NewPCG(uint64(seed), uint64(budget)))
					out, done := walk(t, g.Matcher(v), v, budget, rng)
					if !done {
						t.Fatalf("budget %d seed %d: not complete: %q", budget, seed, out)
					}
					if err := conforms(ref, out); err != nil {
						t.Fatalf("budget %d seed %d: %q: %v", budget, seed, out, err)
					}
					if seed == 0 {
						t.Logf("budget %d: %d bytes: %q", budget, len(out), out)
					}
				}
			}
		})
	}
}

// TestTightBudget runs with exactly MinTokens over the one-byte vocabulary,
// where no piece can shorten the cheapest value: every walk must still end
// complete, so it is exactly a cheapest value.
func TestTightBudget(t *testing.T) {
	t.Parallel()
	v := byteVocab()
	for _, s := range walkSchemas {
		g, err := CompileSchema([]byte(s.schema))
		if err != nil {
			t.Fatal(err)
		}
		ref := reference(t, s.schema)
		for seed := range 4 {
			budget := g.MinTokens(v)
			out, done := walk(t, g.Matcher(v), v, budget, rand.New(rand.NewPCG(uint64(seed), 7)))
			if !done || len(out) != budget {
				t.Fatalf("%s: budget %d: %q (%d bytes), done %v", s.name, budget, out, len(out), done)
			}
			if err := conforms(ref, out); err != nil {
				t.Fatalf("%s: %q: %v", s.name, out, err)
			}
		}
	}
}

// TestOverBudget: below the minimum the matcher keeps to the cheapest
// continuations, so the output is a prefix of a cheapest value.
func TestOverBudget(t *testing.T) {
	t.Parallel()
	v := byteVocab()
	g, err := CompileSchema([]byte(walkSchemas[0].schema))
	if err != nil {
		t.Fatal(err)
	}
	least := g.MinTokens(v)
	out, done := walk(t, g.Matcher(v), v, least-3, rand.New(rand.NewPCG(1, 2)))
	if done || len(out) != least-3 {
		t.Fatalf("%q, done %v", out, done)
	}
	rest, done := walk(t, g.Matcher(v), v, least, rand.New(rand.NewPCG(1, 2)))
	if !done || string(rest[:len(out)]) != string(out) {
		t.Fatalf("%q is not a prefix of the cheapest %q", out, rest)
	}
}

// TestPromise checks the invariant budget steering rests on, from states
// deep inside values: after a random prefix, a walk whose budget is
// exactly the promised completion cost must complete the value.
func TestPromise(t *testing.T) {
	t.Parallel()
	v := byteVocab()
	all := append([]struct{ name, schema string }{{"json_object", ""}}, walkSchemas...)
	for _, s := range all {
		g := JSONObject()
		ref := reference(t, `{"type":"object"}`)
		if s.schema != "" {
			var err error
			if g, err = CompileSchema([]byte(s.schema)); err != nil {
				t.Fatal(err)
			}
			ref = reference(t, s.schema)
		}
		for seed := range 30 {
			rng := rand.New(rand.NewPCG(uint64(seed), 11))
			m := g.Matcher(v)
			prefix := wander(t, m, v, rng.IntN(80), rng)
			out := checkPromise(t, m, v, prefix, rng)
			if err := conforms(ref, out); err != nil {
				t.Fatalf("%s: %q: %v", s.name, out, err)
			}
		}
	}
}

// wander takes k random allowed tokens with no budget in sight (never EOS).
func wander(tb testing.TB, m *Matcher, v *Vocab, k int, rng *rand.Rand) []byte {
	tb.Helper()
	logits := make([]float32, v.Size())
	var out []byte
	for range k {
		clear(logits)
		m.Mask(logits, 1<<20)
		var allowed []uint32
		for id, l := range logits {
			if l == 0 && !v.IsEOS(uint32(id)) {
				allowed = append(allowed, uint32(id))
			}
		}
		if len(allowed) == 0 {
			break
		}
		tok := allowed[rng.IntN(len(allowed))]
		if err := m.Accept(tok); err != nil {
			tb.Fatalf("after %q: Accept(%d) of an allowed token: %v", out, tok, err)
		}
		out = append(out, v.Piece(tok)...)
	}
	return out
}
