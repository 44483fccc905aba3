package constrain

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/sharedtest"
)

// byteEOS is the EOS id of byteVocab.
const byteEOS = 256

// byteVocab has one token a byte (id b emits b) and EOS at 256: feeding it
// text tests the character-level automaton.
func byteVocab() *Vocab {
	pieces := make([][]byte, 257)
	for b := range 256 {
		pieces[b] = []byte{byte(b)}
	}
	return NewVocab(pieces, []uint32{byteEOS})
}

// feed accepts s byte by byte, then EOS; it reports whether the whole text
// was a complete value.
func feed(tb testing.TB, m *Matcher, s []byte) bool {
	tb.Helper()
	for _, b := range s {
		if err := m.Accept(uint32(b)); err != nil {
			if !errors.Is(err, ErrRejected) {
				tb.Fatalf("Accept: %v, want ErrRejected", err)
			}
			return false
		}
	}
	return m.Done() && m.Accept(byteEOS) == nil
}

// reference compiles schema with the reference validator.
func reference(tb testing.TB, schema string) *jsonschema.Schema {
	tb.Helper()
	s, ok := tryReference([]byte(schema))
	if !ok {
		tb.Fatalf("the reference validator cannot compile %s", schema)
	}
	return s
}

// tryReference is reference for schemas that may not compile.
func tryReference(schema []byte) (*jsonschema.Schema, bool) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, false
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if c.AddResource("mem:///schema.json", doc) != nil {
		return nil, false
	}
	s, err := c.Compile("mem:///schema.json")
	return s, err == nil
}

// conforms reports whether out is one JSON value valid against s.
func conforms(s *jsonschema.Schema, out []byte) error {
	if !json.Valid(out) {
		return errInvalidJSON
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

var errInvalidJSON = jsonError("not valid JSON")

type jsonError string

func (e jsonError) Error() string { return string(e) }

// stories caches the stories260K Vocab across tests (building it is the
// expensive part of a small test).
var stories struct {
	sync.Mutex
	v *Vocab
}

// storiesVocab is the stories260K tokenizer as a Vocab: pieces as emitted
// mid-text, the control tokens unk and BOS empty, EOS at 2.
func storiesVocab(tb testing.TB) *Vocab {
	tb.Helper()
	dir := sharedtest.Path(tb, sharedtest.Stories260K)
	stories.Lock()
	defer stories.Unlock()
	if stories.v != nil {
		return stories.v
	}
	bpe, err := tokenizer.LoadBPEFile(filepath.Join(dir, "tok512.bin"), 512)
	if err != nil {
		tb.Fatal(err)
	}
	pieces := make([][]byte, bpe.VocabSize())
	prev := bpe.Encode("a", false, false)[0] // not BOS: no leading-space stripping
	for id := range pieces {
		if id > int(tokenizer.EOS) {
			pieces[id] = bpe.Piece(prev, uint32(id))
		}
	}
	stories.v = NewVocab(pieces, []uint32{tokenizer.EOS})
	return stories.v
}

// walk generates with m over v for at most budget tokens, sampling at
// temperature 1 from random logits after Mask (Gumbel-max), and returns
// the text and whether the matcher ended Done.
func walk(tb testing.TB, m *Matcher, v *Vocab, budget int, rng *rand.Rand) ([]byte, bool) {
	tb.Helper()
	logits := make([]float32, v.Size())
	var out []byte
	for step := range budget {
		for i := range logits {
			logits[i] = float32(rng.NormFloat64())
		}
		m.Mask(logits, budget-step-1)
		best, pick := math.Inf(-1), -1
		for i, l := range logits {
			if math.IsInf(float64(l), -1) {
				continue
			}
			if g := float64(l) - math.Log(-math.Log(rng.Float64())); g > best {
				best, pick = g, i
			}
		}
		if pick < 0 {
			tb.Fatalf("step %d after %q: Mask allowed no token", step, out)
		}
		if err := m.Accept(uint32(pick)); err != nil {
			tb.Fatalf("step %d after %q: Accept(%d) of a token Mask allowed: %v", step, out, pick, err)
		}
		if v.IsEOS(uint32(pick)) {
			return out, true
		}
		out = append(out, v.Piece(uint32(pick))...)
	}
	return out, m.Done()
}
