package constrain

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// cheapest is the completion cost the matcher's state promises.
func cheapest(m *Matcher) int {
	c := dead
	for _, h := range m.heads {
		c = min(c, h.top.cost)
	}
	return int(c)
}

// checkPromise completes m over the one-byte vocabulary v within exactly
// the cost its state promises: the invariant budget steering rests on.
func checkPromise(tb testing.TB, m *Matcher, v *Vocab, prefix []byte, rng *rand.Rand) []byte {
	tb.Helper()
	promise := cheapest(m)
	out, done := walk(tb, m, v, promise, rng)
	if !done || len(out) > promise {
		tb.Fatalf("after %q the state promises %d more bytes, but a walk with that budget gave %q (done %v)", prefix, promise, out, done)
	}
	return append(append([]byte(nil), prefix...), out...)
}

// FuzzMatcher feeds arbitrary bytes to the JSONObject grammar one byte a
// token, then the same bytes cut into multi-byte tokens. What it accepts
// whole must be a valid JSON object; both feeds must agree; Mask must
// allow exactly what Accept takes; and from the longest accepted prefix
// the promised completion must exist.
func FuzzMatcher(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2.5e-3,{"b":null}],"c":"\u00e9\n"}`, ` {"x" : true}`, `{"a":01}`, "{\"\xe2\x82\xac\":1}", `{"a":"\ud800"}`, `[1]`} {
		f.Add([]byte(s), uint64(1))
	}
	bv := byteVocab()
	f.Fuzz(func(t *testing.T, data []byte, cut uint64) {
		if len(data) > 512 {
			return
		}
		m := JSONObject().Matcher(bv)
		n := 0
		for n < len(data) && m.Accept(uint32(data[n])) == nil {
			n++
		}
		doneBytes := m.Done()
		whole := n == len(data) && doneBytes
		if whole && (!json.Valid(data) || !strings.HasPrefix(strings.TrimLeft(string(data), " \t\r\n"), "{")) {
			t.Fatalf("accepted %q, which is not a JSON object", data)
		}
		done := checkPromise(t, m, bv, data[:n], rand.New(rand.NewPCG(cut, 0)))
		if !json.Valid(done) {
			t.Fatalf("completion %q is not valid JSON", done)
		}
		pieces, toks := cutTokens(data, cut)
		v := NewVocab(pieces, []uint32{0})
		tm := JSONObject().Matcher(v)
		logits := make([]float32, v.Size())
		accepted, failed := 0, 0
		for _, tok := range toks {
			clear(logits)
			tm.Mask(logits, 1<<20)
			err := tm.Accept(tok)
			if (err == nil) != (logits[tok] == 0) {
				t.Fatalf("token %q after %q: Mask allows %v, Accept says %v", pieces[tok], data[:accepted], logits[tok] == 0, err)
			}
			if err != nil {
				failed = len(pieces[tok])
				break
			}
			accepted += len(pieces[tok])
		}
		switch {
		case n == len(data) && (accepted != n || tm.Done() != doneBytes),
			n < len(data) && (accepted > n || accepted+failed <= n):
			t.Fatalf("%q: the byte feed took %d bytes (done %v), the token feed %d (done %v)", data, n, doneBytes, accepted, tm.Done())
		}
	})
}

// cutTokens cuts data into pieces of 1 to 4 bytes chosen by cut; piece i+1
// is the i-th token (token 0 is EOS).
func cutTokens(data []byte, cut uint64) ([][]byte, []uint32) {
	rng := rand.New(rand.NewPCG(cut, 1))
	pieces := [][]byte{nil}
	var toks []uint32
	for len(data) > 0 {
		k := min(1+rng.IntN(4), len(data))
		pieces = append(pieces, data[:k])
		toks = append(toks, uint32(len(pieces)-1))
		data = data[k:]
	}
	return pieces, toks
}

// FuzzCompileSchema compiles arbitrary schemas: it must never panic, fail
// only with a *SchemaError, and a compiled schema's random walks (and its
// tightest-budget walk) must produce instances the reference validator
// accepts. An odd seed reads the input as choices for schemaGen instead,
// whose schemas must all compile.
func FuzzCompileSchema(f *testing.F) {
	for _, s := range walkSchemas {
		f.Add([]byte(s.schema), uint64(0))
	}
	for _, s := range []string{`{"type":"string","pattern":"a"}`, `{"type":"integer","minimum":-3,"maximum":12}`,
		`{"type":"number","exclusiveMinimum":-0.25,"maximum":1e3}`, `{"enum":[1,12,123,"a\"b"]}`,
		`{"type":"array","items":{"$ref":"#"},"maxItems":2}`, `{"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}}},{"type":"object","properties":{"a":{"type":"string"}}}]}`} {
		f.Add([]byte(s), uint64(2))
	}
	f.Add([]byte("\x07\x01\x06\x09\x05\x00\x08\x0a\x02"), uint64(1))
	bv := byteVocab()
	f.Fuzz(func(t *testing.T, schema []byte, seed uint64) {
		if seed%2 == 1 { // half the inputs drive the generator instead
			checkGenerated(t, (&schemaGen{choices: schema}).schema(), bv, rand.New(rand.NewPCG(seed, 4)))
			return
		}
		g, err := CompileSchema(schema)
		if err != nil {
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("error %v is not a *SchemaError", err)
			}
			return
		}
		ref, ok := tryReference(schema)
		if !ok {
			return // the reference refuses it (an $id it cannot resolve, say)
		}
		rng := rand.New(rand.NewPCG(seed, 3))
		budget := g.MinTokens(bv)
		if budget > 4096 {
			return
		}
		for _, b := range []int{budget, budget + 20, budget + 200} {
			out, done := walk(t, g.Matcher(bv), bv, b, rng)
			if !done {
				t.Fatalf("budget %d: incomplete %q", b, out)
			}
			if err := conforms(ref, out); err != nil {
				t.Fatalf("schema %s: budget %d: %q: %v", schema, b, out, err)
			}
		}
		m := g.Matcher(bv)
		prefix := wander(t, m, bv, rng.IntN(100), rng)
		if out := checkPromise(t, m, bv, prefix, rng); conforms(ref, out) != nil {
			t.Fatalf("schema %s: %q: %v", schema, out, conforms(ref, out))
		}
	})
}
