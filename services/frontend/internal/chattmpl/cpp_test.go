package chattmpl

// A reader of the C++ initializers in llama.cpp's
// tests/test-chat-template.cpp, so the tests here run on its vectors as
// llama.cpp ships them: string literals ("..." with C escapes, u8"...",
// R"(...)", adjacent ones joined), words (true, false), braced lists and
// macro calls such as U8C(x), which stand for their argument.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// cppToken is one token of C++ source: a string literal's value, an
// identifier or a punctuation character.
type cppToken struct {
	kind byte // 's' string, 'c' character literal, 'i' identifier, 'p' punctuation
	text string
}

func cppTokens(src string) ([]cppToken, error) {
	var out []cppToken
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.HasPrefix(src[i:], "//"):
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				return out, nil
			}
			i += j + 1
		case strings.HasPrefix(src[i:], "/*"):
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("offset %d: unterminated comment", i)
			}
			i += j + 4
		case c == '#': // preprocessor line
			j := strings.IndexByte(src[i:], '\n')
			if j < 0 {
				return out, nil
			}
			i += j + 1
		case isIdentStart(c):
			j := i
			for j < len(src) && (isIdentStart(src[j]) || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			word := src[i:j]
			if j < len(src) && (src[j] == '"') && (word == "u8" || word == "R" || word == "u8R" || word == "L" || word == "u" || word == "U" || word == "LR" || word == "uR" || word == "UR") {
				s, n, err := cppString(src[j:], strings.HasSuffix(word, "R"))
				if err != nil {
					return nil, fmt.Errorf("offset %d: %w", i, err)
				}
				out = append(out, cppToken{'s', s})
				i = j + n
				continue
			}
			out = append(out, cppToken{'i', word})
			i = j
		case c == '"':
			s, n, err := cppString(src[i:], false)
			if err != nil {
				return nil, fmt.Errorf("offset %d: %w", i, err)
			}
			out = append(out, cppToken{'s', s})
			i += n
		case c == '\'':
			j := i + 1
			for j < len(src) && src[j] != '\'' {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			out = append(out, cppToken{'c', src[i:min(j+1, len(src))]})
			i = j + 1
		default:
			out = append(out, cppToken{'p', string(c)})
			i++
		}
	}
	return out, nil
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// cppString decodes the literal at the start of s (at its opening quote),
// returning its value and its length in s.
func cppString(s string, raw bool) (string, int, error) {
	if raw {
		open := strings.IndexByte(s, '(')
		if open < 0 {
			return "", 0, fmt.Errorf("raw string without (")
		}
		delim := ")" + s[1:open] + `"`
		end := strings.Index(s[open+1:], delim)
		if end < 0 {
			return "", 0, fmt.Errorf("unterminated raw string")
		}
		return s[open+1 : open+1+end], open + 1 + end + len(delim), nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			return b.String(), i + 1, nil
		case '\n':
			return "", 0, fmt.Errorf("newline in string literal")
		case '\\':
			if i+1 >= len(s) {
				return "", 0, fmt.Errorf("unterminated escape")
			}
			i++
			switch e := s[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'v':
				b.WriteByte('\v')
			case '\\', '"', '\'', '?':
				b.WriteByte(e)
			case 'x':
				j := i + 1
				for j < len(s) && strings.IndexByte("0123456789abcdefABCDEF", s[j]) >= 0 {
					j++
				}
				v, err := strconv.ParseUint(s[i+1:j], 16, 8)
				if err != nil {
					return "", 0, fmt.Errorf("bad \\x escape")
				}
				b.WriteByte(byte(v))
				i = j - 1
			case 'u', 'U':
				n := 4
				if e == 'U' {
					n = 8
				}
				if i+n >= len(s) {
					return "", 0, fmt.Errorf("short \\%c escape", e)
				}
				v, err := strconv.ParseUint(s[i+1:i+1+n], 16, 32)
				if err != nil {
					return "", 0, fmt.Errorf("bad \\%c escape", e)
				}
				b.WriteRune(rune(v))
				i += n
			default:
				if e >= '0' && e <= '7' {
					j := i
					for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
						j++
					}
					v, _ := strconv.ParseUint(s[i:j], 8, 8)
					b.WriteByte(byte(v))
					i = j - 1
					continue
				}
				return "", 0, fmt.Errorf("unknown escape \\%c", e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("unterminated string literal")
}

// cppValue is a C++ initializer: a string (adjacent literals joined), a
// word (true, false), or a braced list.
type cppValue struct {
	str   string
	word  string
	list  []cppValue
	isStr bool
	isLst bool
}

type cppParser struct {
	toks []cppToken
	pos  int
}

func (p *cppParser) peek() cppToken {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return cppToken{}
}

func (p *cppParser) value() (cppValue, error) {
	t := p.peek()
	switch {
	case t.kind == 's':
		v := cppValue{isStr: true}
		for p.peek().kind == 's' {
			v.str += p.peek().text
			p.pos++
		}
		return v, nil
	case t.kind == 'p' && t.text == "{":
		p.pos++
		v := cppValue{isLst: true}
		for {
			if t := p.peek(); t.kind == 'p' && t.text == "}" {
				p.pos++
				return v, nil
			}
			item, err := p.value()
			if err != nil {
				return v, err
			}
			v.list = append(v.list, item)
			switch t := p.peek(); {
			case t.kind == 'p' && t.text == ",":
				p.pos++
			case t.kind == 'p' && t.text == "}":
			default:
				return v, fmt.Errorf("token %d: want , or } in list, got %q", p.pos, t.text)
			}
		}
	case t.kind == 'i':
		p.pos++
		if n := p.peek(); n.kind == 'p' && n.text == "(" { // a macro such as U8C(x): its argument
			p.pos++
			v, err := p.value()
			if err != nil {
				return v, err
			}
			if n := p.peek(); n.kind != 'p' || n.text != ")" {
				return v, fmt.Errorf("token %d: want ) after %s(", p.pos, t.text)
			}
			p.pos++
			return v, nil
		}
		return cppValue{word: t.text}, nil
	}
	return cppValue{}, fmt.Errorf("token %d: unexpected %q", p.pos, t.text)
}

// initializer parses the braced initializer that follows the first
// occurrence of name.
func initializer(toks []cppToken, name string) (cppValue, error) {
	for i := 0; i+1 < len(toks); i++ {
		if toks[i].kind == 'i' && toks[i].text == name && toks[i+1].kind == 'p' && toks[i+1].text == "{" {
			p := &cppParser{toks: toks, pos: i + 1}
			return p.value()
		}
	}
	return cppValue{}, fmt.Errorf("no initializer of %s", name)
}

// testCase is llama.cpp's TestCase: fields in its declaration order;
// jinja is supported_with_jinja, extra its extra_conversation.
type testCase struct {
	name, template, expected, expectedJinja, bos, eos string
	jinja                                             bool
	extra                                             []msg
}

// msg is a {role, content} pair.
type msg = [2]string

func messagesOf(v cppValue) ([]msg, error) {
	var out []msg
	for _, m := range v.list {
		if len(m.list) != 2 || !m.list[0].isStr || !m.list[1].isStr {
			return nil, fmt.Errorf("message is not {role, content}")
		}
		out = append(out, msg{m.list[0].str, m.list[1].str})
	}
	return out, nil
}

func parseCases(src string) ([]msg, []testCase, error) {
	toks, err := cppTokens(src)
	if err != nil {
		return nil, nil, err
	}
	cv, err := initializer(toks, "conversation")
	if err != nil {
		return nil, nil, err
	}
	conv, err := messagesOf(cv)
	if err != nil {
		return nil, nil, err
	}
	tv, err := initializer(toks, "test_cases")
	if err != nil {
		return nil, nil, err
	}
	var cases []testCase
	for i, c := range tv.list {
		f := c.list
		if len(f) < 4 {
			return nil, nil, fmt.Errorf("case %d: %d fields", i, len(f))
		}
		tc := testCase{jinja: true}
		strs := []*string{&tc.name, &tc.template, &tc.expected, &tc.expectedJinja, &tc.bos, &tc.eos}
		for j, dst := range strs {
			if j < len(f) {
				if !f[j].isStr {
					return nil, nil, fmt.Errorf("case %d field %d: not a string", i, j)
				}
				*dst = f[j].str
			}
		}
		if len(f) > 6 {
			tc.jinja = f[6].word != "false"
		}
		if len(f) > 7 {
			if tc.extra, err = messagesOf(f[7]); err != nil {
				return nil, nil, fmt.Errorf("case %d: %w", i, err)
			}
		}
		cases = append(cases, tc)
	}
	return conv, cases, nil
}

// FuzzCppTokens: the reader fails or succeeds on any source, never
// panics.
func FuzzCppTokens(f *testing.F) {
	f.Add(`std::vector<TestCase> test_cases { { /* .name= */ "a" "b", u8"\u00e9\x41\101", R"x(raw)x", true, {{"user", U8C("hi")}} } };`)
	f.Fuzz(func(t *testing.T, src string) {
		if toks, err := cppTokens(src); err == nil {
			_, _ = initializer(toks, "test_cases")
		}
	})
}
