package constrain

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestJSONObjectSnippets feeds JSON texts byte by byte to the JSONObject
// grammar. Plain cases must agree with encoding/json (a valid text whose
// value is an object); the rest are where the grammar is deliberately
// stricter than JSON (caps, no trailing text, no surrogate escapes).
func TestJSONObjectSnippets(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth)
	tooDeep := strings.Repeat(`{"a":`, MaxDepth) + "{}" + strings.Repeat("}", MaxDepth)
	plain := []string{
		`{}`, `{"a":1}`, ` {"a" : [1, -2.5e3, 0.0, -0, 1E+2, 3e-7]}`,
		`{"s":"x\u00e9\"\\\/\b\f\n\r\t", "t":"héllo 世界 😀"}`,
		`{"a":true,"b":false,"c":null,"d":{},"e":[],"f":[[[]]],"g":[{}, {"h":[null]}]}`,
		`{"":""}`, "{\n  \"a\": 1,\n  \"b\": [\n    2\n  ]\n}",
		`{"a":01}`, `{"a":1,}`, `{"a":[1,]}`, `{"a"}`, `{"a":}`, `{a:1}`, `{'a':1}`,
		`{"a":1 "b":2}`, `{"a":.5}`, `{"a":1.}`, `{"a":1e}`, `{"a":+1}`, `{"a":-}`,
		`{"a":tru}`, `{"a":nul}`, `{"a":True}`, `{"a":NaN}`, `{"a":"\x"}`, `{"a":"\u12"}`,
		"{\"a\":\"\x01\"}", "{\"a\":\"\n\"}", `{"a":"unterminated}`, `{"a":1}}`, `{"a":1}{}`, `{"a":[1}`,
		`[]`, `[1]`, `"str"`, `1`, `null`, ``, ` `, `{`, `}`, `{"a":1`,
		"{\"a\":\"\xff\"}", "{\"a\":\"\xc3\"}", "{\"a\":\"\xc0\x80\"}", "{\"a\":\"\xe0\x80\x80\"}",
		"{\"a\":\"\xf4\x90\x80\x80\"}", "{\"a\":\"\xed\xa0\x80\"}", "{\"\xe2\x82\xac\":\"\xf0\x9f\x98\x80\"}",
		deep,
	}
	for _, s := range plain {
		// encoding/json accepts invalid UTF-8 inside strings (it replaces
		// it); the grammar does not, and neither does RFC 8259.
		want := json.Valid([]byte(s)) && strings.HasPrefix(strings.TrimSpace(s), "{") && validUTF8(s)
		if got := feed(t, JSONObject().Matcher(byteVocab()), []byte(s)); got != want {
			t.Errorf("%q: accepted %v, want %v", s, got, want)
		}
	}
	stricter := []struct {
		in   string
		want bool
	}{
		{`{"a":1} `, false}, // trailing whitespace: after the value only EOS
		{`{"a":` + strings.Repeat("9", MaxIntDigits) + `}`, true},
		{`{"a":` + strings.Repeat("9", MaxIntDigits+1) + `}`, false},
		{`{"a":0.` + strings.Repeat("9", MaxFracDigits) + `}`, true},
		{`{"a":0.` + strings.Repeat("9", MaxFracDigits+1) + `}`, false},
		{`{"a":1e99}`, true},
		{`{"a":1e100}`, false},
		{`{"a":` + strings.Repeat(" ", MaxWhitespace) + `1}`, true},
		{`{"a":` + strings.Repeat(" ", MaxWhitespace+1) + `1}`, false},
		{`{"a":"\ud83d\ude00"}`, false}, // surrogate escapes: raw UTF-8 instead
		{`{"a":"\uD7FF\uE000"}`, true},
		{tooDeep, false},
	}
	for _, c := range stricter {
		if !json.Valid([]byte(c.in)) {
			t.Fatalf("%q: not valid JSON, a bad case", c.in)
		}
		if got := feed(t, JSONObject().Matcher(byteVocab()), []byte(c.in)); got != c.want {
			t.Errorf("%q: accepted %v, want %v", c.in, got, c.want)
		}
	}
}

func validUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// TestMatcherPrefixes checks, for every prefix of a valid object, that it
// is accepted, that Done holds exactly at the end, and that EOS is refused
// until then.
func TestMatcherPrefixes(t *testing.T) {
	t.Parallel()
	s := `{"k":[1,{"x":"yé"},-0.5e+3,true],"n":null}`
	m := JSONObject().Matcher(byteVocab())
	for i := range len(s) {
		if m.Done() {
			t.Fatalf("Done after %q", s[:i])
		}
		if err := m.Accept(byteEOS); err == nil {
			t.Fatalf("EOS accepted after %q", s[:i])
		}
		if err := m.Accept(uint32(s[i])); err != nil {
			t.Fatalf("after %q: %v", s[:i], err)
		}
	}
	if !m.Done() {
		t.Fatal("not Done at the end")
	}
	if err := m.Accept('x'); err == nil {
		t.Fatal("text accepted after the value")
	}
	if err := m.Accept(byteEOS); err != nil {
		t.Fatal(err)
	}
	if err := m.Accept(byteEOS); err == nil {
		t.Fatal("EOS accepted twice")
	}
}

// TestMaskMatchesAccept checks that Mask allows exactly the tokens Accept
// takes (with a budget that binds nothing), on a vocabulary with
// multi-byte pieces, at every step of a fixed text.
func TestMaskMatchesAccept(t *testing.T) {
	t.Parallel()
	pieces := [][]byte{nil, []byte(`{"`), []byte(`":`), []byte(`"}`), []byte(`,"`), []byte(`ab`), []byte(" "), []byte("  "),
		[]byte("12"), []byte("."), []byte("e5"), []byte("\xc3"), []byte("\xa9"), []byte("\xc3\xa9"), []byte(`\u00`), []byte("e9"),
		[]byte("[1"), []byte("]}"), []byte("}"), []byte(`"`), []byte("tr"), []byte("ue"), []byte(","), []byte("{}")}
	for b := 0x20; b < 0x7f; b++ {
		pieces = append(pieces, []byte{byte(b)})
	}
	v := NewVocab(pieces, []uint32{0})
	text := []uint32{1, 5, 2, 8, 9, 8, 10, 4, 5, 2, 19, 11, 12, 13, 14, 15, 3}
	m := JSONObject().Matcher(v)
	logits := make([]float32, v.Size())
	for step, tok := range append(text, 0) {
		for i := range logits {
			logits[i] = 0
		}
		m.Mask(logits, 1<<20)
		for id := range logits {
			probe := JSONObject().Matcher(v)
			for _, p := range text[:step] {
				if err := probe.Accept(p); err != nil {
					t.Fatal(err)
				}
			}
			allowed := probe.Accept(uint32(id)) == nil
			if masked := logits[id] < 0; masked == allowed {
				t.Fatalf("step %d token %d (%q): Mask allows %v, Accept takes %v", step, id, v.Piece(uint32(id)), !masked, allowed)
			}
		}
		if err := m.Accept(tok); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}
