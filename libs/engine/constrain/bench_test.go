package constrain

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"switchyard.dev/libs/sharedtest"
)

// syntheticVocab is a byte-level-BPE-like vocabulary of n tokens: EOS at 0,
// every single byte, then pieces of 2 to 8 bytes drawn mostly from
// letters, with a leading space on a third of them and some punctuation
// and digits, as real vocabularies have.
func syntheticVocab(n int, seed uint64) *Vocab {
	rng := rand.New(rand.NewPCG(seed, 9))
	pieces := [][]byte{nil}
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
	}
	const alpha = "etaoinshrdlucmfwypvbgkjqxzETAOINSHRDLU"
	const other = `0123456789.,:;"'{}[]()-_/\!?@#$%^&*+= ` + "\n\t"
	seen := map[string]bool{}
	for len(pieces) < n {
		k := 2 + rng.IntN(7)
		p := make([]byte, 0, k)
		if rng.IntN(3) == 0 {
			p = append(p, ' ')
		}
		for len(p) < k {
			if rng.IntN(8) == 0 {
				p = append(p, other[rng.IntN(len(other))])
			} else {
				p = append(p, alpha[rng.IntN(len(alpha))])
			}
		}
		if !seen[string(p)] {
			seen[string(p)] = true
			pieces = append(pieces, p)
		}
	}
	return NewVocab(pieces, []uint32{0})
}

// benchVocab512 is stories260K's vocabulary when present, else a synthetic
// one of the same size.
func benchVocab512(b *testing.B) *Vocab {
	if _, ok := sharedtest.Optional(b, sharedtest.Stories260K); ok {
		return storiesVocab(b)
	}
	return syntheticVocab(512, 1)
}

const toolSchema = `{"anyOf":[
	{"type":"object","properties":{"name":{"const":"get_weather"},"arguments":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false},
	{"type":"object","properties":{"name":{"const":"search"},"arguments":{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":50}},"required":["query","limit"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false}]}`

// BenchmarkMask replays seeded random generations (budget 200 tokens) and
// reports the mean cost of one Mask call, ns/token-step, over the steps of
// the generations (so in-string steps, where little of the trie is
// pruned, weigh as often as they occur).
func BenchmarkMask(b *testing.B) {
	vocabs := []struct {
		name string
		v    func(*testing.B) *Vocab
	}{
		{"vocab=512", benchVocab512},
		{"vocab=32k", func(*testing.B) *Vocab { return syntheticVocab(32000, 2) }},
	}
	tool, err := CompileSchema([]byte(toolSchema))
	if err != nil {
		b.Fatal(err)
	}
	grammars := []struct {
		name string
		g    *Grammar
	}{{"json_object", JSONObject()}, {"tool_call", tool}}
	for _, vc := range vocabs {
		for _, gc := range grammars {
			b.Run(vc.name+"/"+gc.name, func(b *testing.B) {
				v := vc.v(b)
				var runs [][]uint32
				for seed := range 4 {
					runs = append(runs, trajectory(b, gc.g, v, 200, uint64(seed)))
				}
				logits := make([]float32, v.Size())
				steps := 0
				b.ResetTimer()
				start := time.Now()
				for i := range b.N {
					run := runs[i%len(runs)]
					m := gc.g.Matcher(v)
					for j, tok := range run {
						m.Mask(logits, 200-j-1)
						if err := m.Accept(tok); err != nil {
							b.Fatal(err)
						}
					}
					steps += len(run)
				}
				b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(max(steps, 1)), "ns/token-step")
			})
		}
	}
}

// BenchmarkMaskInString is the worst case: a state inside an unconstrained
// string, where every piece without a quote, backslash or control byte
// survives and the walk visits nearly the whole trie.
func BenchmarkMaskInString(b *testing.B) {
	for _, n := range []int{512, 32000} {
		b.Run(fmt.Sprintf("vocab=%d", n), func(b *testing.B) {
			v := syntheticVocab(n, 3)
			m := JSONObject().Matcher(v)
			for _, c := range []byte(`{"a":"x`) {
				if err := m.Accept(uint32(c) + 1); err != nil {
					b.Fatal(err)
				}
			}
			logits := make([]float32, v.Size())
			b.ResetTimer()
			for range b.N {
				m.Mask(logits, 100)
			}
		})
	}
}

// trajectory is the tokens of one seeded generation.
func trajectory(b *testing.B, g *Grammar, v *Vocab, budget int, seed uint64) []uint32 {
	m := g.Matcher(v)
	rng := rand.New(rand.NewPCG(seed, 5))
	logits := make([]float32, v.Size())
	var toks []uint32
	for step := range budget {
		for i := range logits {
			logits[i] = float32(rng.NormFloat64())
		}
		m.Mask(logits, budget-step-1)
		pick, best := -1, float32(0)
		for i, l := range logits {
			if l > -1e30 && (pick < 0 || l > best) {
				pick, best = i, l
			}
		}
		if err := m.Accept(uint32(pick)); err != nil {
			b.Fatal(err)
		}
		toks = append(toks, uint32(pick))
		if v.IsEOS(uint32(pick)) {
			break
		}
	}
	return toks
}

// BenchmarkCompileSchema compiles a tool list of 40 functions (anyOf of
// call shapes, about 18 KiB) and prices it for a vocabulary: what the
// first request with a new tool list pays (later ones hit the Cache).
func BenchmarkCompileSchema(b *testing.B) {
	var alts []string
	for i := range 40 {
		alts = append(alts, fmt.Sprintf(`{"type":"object","properties":{"name":{"const":"tool_%d"},"arguments":{"type":"object",
			"properties":{"query":{"type":"string","description":"what to look up"},"limit":{"type":"integer","minimum":1,"maximum":100},
			"mode":{"enum":["fast","exact","fuzzy"]},"tags":{"type":"array","items":{"type":"string"},"maxItems":5}},
			"required":["query","limit","mode","tags"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false}`, i))
	}
	schema := []byte(`{"anyOf":[` + strings.Join(alts, ",") + `]}`)
	v := syntheticVocab(32000, 2)
	b.SetBytes(int64(len(schema)))
	for b.Loop() {
		g, err := CompileSchema(schema)
		if err != nil {
			b.Fatal(err)
		}
		g.Matcher(v)
	}
}
