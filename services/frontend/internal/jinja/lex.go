package jinja

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// segKind is what a piece of template source is.
type segKind uint8

const (
	segText  segKind = iota // literal output
	segVar                  // {{ expression }}
	segBlock                // {% statement %}
)

// segment is one piece of the template: text, or a tag already split
// into expression tokens.
type segment struct {
	kind segKind
	text string
	toks []token
	line int
}

// tokKind is the kind of an expression token.
type tokKind uint8

const (
	tokName tokKind = iota
	tokString
	tokInt
	tokFloat
	tokOp
)

type token struct {
	kind tokKind
	s    string // name, operator, or a string literal's value
	i    int64
	f    float64
}

// lexer splits a template into segments. Whitespace follows the rules
// Hugging Face renders chat templates with (trim_blocks and
// lstrip_blocks): a block or comment tag alone on its line takes the
// line's indentation and its newline with it; "-" inside a delimiter
// strips all whitespace on that side, "+" keeps it.
type lexer struct {
	src  string
	pos  int
	line int
	segs []segment
	// lineStart: the previous tag ended at the start of a line, so
	// the text that follows it starts one (for lstrip_blocks).
	lineStart bool
}

func lex(src string) ([]segment, error) {
	l := &lexer{src: src, line: 1, lineStart: true}
	for l.pos < len(src) {
		if err := l.next(); err != nil {
			return nil, fmt.Errorf("line %d: %w", l.line, err)
		}
	}
	return l.segs, nil
}

// next lexes the text up to the next tag and the tag.
func (l *lexer) next() error {
	j := nextTag(l.src, l.pos)
	if j < 0 {
		l.text(l.src[l.pos:])
		l.pos = len(l.src)
		return nil
	}
	text := l.src[l.pos:j]
	kind := l.src[j+1]
	start := j + 2
	var mod byte
	if start < len(l.src) && (l.src[start] == '-' || l.src[start] == '+') {
		mod = l.src[start]
		start++
	}
	switch {
	case mod == '-':
		text = strings.TrimRightFunc(text, unicode.IsSpace)
	case mod != '+' && kind != '{':
		lp := strings.LastIndexByte(text, '\n') + 1
		if (lp > 0 || l.lineStart) && lp < len(text) && strings.TrimLeft(text[lp:], " \t\r\f\v") == "" {
			text = text[:lp]
		}
	}
	l.text(text)
	l.advance(start)
	switch kind {
	case '#':
		end := strings.Index(l.src[start:], "#}")
		if end < 0 {
			return fmt.Errorf("unterminated comment")
		}
		end += start
		right := byte(0)
		if end > start && (l.src[end-1] == '-' || l.src[end-1] == '+') {
			right = l.src[end-1]
		}
		l.afterTag(end+2, right, true)
		return nil
	case '{':
		toks, end, right, err := lexExpr(l.src, start, "}}")
		if err != nil {
			return err
		}
		l.segs = append(l.segs, segment{kind: segVar, toks: toks, line: l.line})
		l.afterTag(end, right, false)
		return nil
	}
	toks, end, right, err := lexExpr(l.src, start, "%}")
	if err != nil {
		return err
	}
	if len(toks) == 1 && toks[0].kind == tokName && toks[0].s == "raw" {
		return l.raw(end, right)
	}
	l.segs = append(l.segs, segment{kind: segBlock, toks: toks, line: l.line})
	l.afterTag(end, right, true)
	return nil
}

// nextTag is the offset of the next "{{", "{%" or "{#" at or after pos.
func nextTag(src string, pos int) int {
	for {
		i := strings.IndexByte(src[pos:], '{')
		if i < 0 || pos+i+1 >= len(src) {
			return -1
		}
		pos += i
		if c := src[pos+1]; c == '{' || c == '%' || c == '#' {
			return pos
		}
		pos++
	}
}

func (l *lexer) text(s string) {
	if s != "" {
		l.segs = append(l.segs, segment{kind: segText, text: s, line: l.line})
	}
}

func (l *lexer) advance(to int) {
	l.line += strings.Count(l.src[l.pos:to], "\n")
	l.pos = to
}

// afterTag moves past a tag ending at end, applying its right-hand
// whitespace control; block says whether trim_blocks applies.
func (l *lexer) afterTag(end int, right byte, block bool) {
	l.advance(end)
	l.lineStart = false
	switch {
	case right == '-':
		k := l.pos
		for k < len(l.src) {
			r, n := utf8.DecodeRuneInString(l.src[k:])
			if !unicode.IsSpace(r) {
				break
			}
			k += n
		}
		l.lineStart = k > l.pos && l.src[k-1] == '\n'
		l.advance(k)
	case right != '+' && block && l.pos < len(l.src) && l.src[l.pos] == '\n':
		l.advance(l.pos + 1)
		l.lineStart = true
	}
}

// raw copies everything up to {% endraw %} as text.
func (l *lexer) raw(end int, right byte) error {
	l.afterTag(end, right, true)
	for k := l.pos; ; {
		j := strings.Index(l.src[k:], "{%")
		if j < 0 {
			return fmt.Errorf("missing endraw")
		}
		j += k
		inner := j + 2
		mod := byte(0)
		if inner < len(l.src) && (l.src[inner] == '-' || l.src[inner] == '+') {
			mod = l.src[inner]
			inner++
		}
		toks, tagEnd, tagRight, err := lexExpr(l.src, inner, "%}")
		if err != nil || len(toks) != 1 || toks[0].kind != tokName || toks[0].s != "endraw" {
			k = j + 2
			continue
		}
		text := l.src[l.pos:j]
		if mod == '-' {
			text = strings.TrimRightFunc(text, unicode.IsSpace)
		}
		l.text(text)
		l.advance(j)
		l.afterTag(tagEnd, tagRight, true)
		return nil
	}
}

// ops are the operators, longest first.
var ops = []string{"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|"}

// lexExpr tokenizes a tag's expression from pos up to closer (outside
// brackets and strings), returning the offset after the closer and the
// whitespace modifier before it.
func lexExpr(src string, pos int, closer string) ([]token, int, byte, error) {
	var toks []token
	depth := 0
	for {
		for pos < len(src) && strings.IndexByte(" \t\r\n", src[pos]) >= 0 {
			pos++
		}
		if pos >= len(src) {
			return nil, 0, 0, fmt.Errorf("unexpected end of template, expected %q", closer)
		}
		if depth == 0 {
			if strings.HasPrefix(src[pos:], closer) {
				return toks, pos + len(closer), 0, nil
			}
			if (src[pos] == '-' || src[pos] == '+' && closer == "%}") && strings.HasPrefix(src[pos+1:], closer) {
				return toks, pos + 1 + len(closer), src[pos], nil
			}
		}
		c := src[pos]
		switch {
		case c == '_' || c < utf8.RuneSelf && unicode.IsLetter(rune(c)):
			j := pos
			for j < len(src) && (src[j] == '_' || src[j] < utf8.RuneSelf && (unicode.IsLetter(rune(src[j])) || unicode.IsDigit(rune(src[j])))) {
				j++
			}
			toks = append(toks, token{kind: tokName, s: src[pos:j]})
			pos = j
		case c >= '0' && c <= '9':
			t, n, err := lexNumber(src[pos:])
			if err != nil {
				return nil, 0, 0, err
			}
			toks = append(toks, t)
			pos += n
		case c == '\'' || c == '"':
			s, n, err := lexString(src[pos:])
			if err != nil {
				return nil, 0, 0, err
			}
			toks = append(toks, token{kind: tokString, s: s})
			pos += n
		default:
			op := ""
			for _, o := range ops {
				if strings.HasPrefix(src[pos:], o) {
					op = o
					break
				}
			}
			if op == "" {
				r, _ := utf8.DecodeRuneInString(src[pos:])
				return nil, 0, 0, fmt.Errorf("unexpected character %q", r)
			}
			switch op {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				if depth > 0 {
					depth--
				}
			}
			toks = append(toks, token{kind: tokOp, s: op})
			pos += len(op)
		}
	}
}

// lexNumber reads an integer or float literal (digits may be grouped
// with underscores).
func lexNumber(s string) (token, int, error) {
	j := 0
	digits := func() {
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '_' && j+1 < len(s) && s[j+1] >= '0' && s[j+1] <= '9') {
			j++
		}
	}
	digits()
	isFloat := false
	if j+1 < len(s) && s[j] == '.' && s[j+1] >= '0' && s[j+1] <= '9' {
		isFloat = true
		j++
		digits()
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && s[k] >= '0' && s[k] <= '9' {
			isFloat = true
			j = k
			digits()
		}
	}
	lit := strings.ReplaceAll(s[:j], "_", "")
	if !isFloat {
		if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return token{kind: tokInt, i: i}, j, nil
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return token{}, 0, fmt.Errorf("bad number %q", s[:j])
	}
	return token{kind: tokFloat, f: f}, j, nil
}

// lexString reads a quoted literal at the start of s, decoding Python's
// escapes; an unknown escape stays as written.
func lexString(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c == q {
			return b.String(), i + 1, nil
		}
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		n := decodeEscape(&b, s[i:])
		i += n - 1
	}
	return "", 0, fmt.Errorf("unterminated string literal")
}

// decodeEscape writes the escape whose letter starts s and returns how
// many bytes of s it used.
func decodeEscape(b *strings.Builder, s string) int {
	simple := map[byte]string{'n': "\n", 't': "\t", 'r': "\r", '\\': "\\", '\'': "'", '"': "\"", 'a': "\a", 'b': "\b", 'f': "\f", 'v': "\v", '\n': ""}
	if r, ok := simple[s[0]]; ok {
		b.WriteString(r)
		return 1
	}
	hex := map[byte]int{'x': 2, 'u': 4, 'U': 8}
	if n, ok := hex[s[0]]; ok && len(s) > n {
		if v, err := strconv.ParseUint(s[1:1+n], 16, 32); err == nil && utf8.ValidRune(rune(v)) {
			b.WriteRune(rune(v))
			return 1 + n
		}
	}
	if s[0] >= '0' && s[0] <= '7' {
		j := 0
		for j < len(s) && j < 3 && s[j] >= '0' && s[j] <= '7' {
			j++
		}
		v, _ := strconv.ParseUint(s[:j], 8, 32)
		b.WriteRune(rune(v))
		return j
	}
	b.WriteByte('\\')
	b.WriteByte(s[0])
	return 1
}
