// Package promqlnames lists the metric names a PromQL expression selects,
// so dashboards and rules can be checked against the metrics that exist.
// It is a scanner, not a parser: it skips strings, label matchers, range
// and subquery brackets, the label lists of by/without/on/ignoring/
// group_left/group_right, numbers and durations, keywords, and names
// called as functions; what remains are the selected metric names.
// Whether an expression parses is promtool's to check.
package promqlnames

import (
	"sort"
	"strings"
)

// keywords are PromQL words that are not metric names.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true,
	"ignoring": true, "group_left": true, "group_right": true, "bool": true, "offset": true,
	"inf": true, "nan": true, "start": true, "end": true,
}

// labelLists are the keywords followed by a parenthesised label list.
var labelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// Names returns the distinct metric names expr selects, sorted. Grafana
// variables ($model, ${model}, $__rate_interval) are skipped.
func Names(expr string) []string {
	s := scanner{src: expr}
	seen := map[string]bool{}
	for {
		name, ok := s.next()
		if !ok {
			break
		}
		seen[name] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

type scanner struct {
	src string
	pos int
}

func isNameStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isNameChar(c byte) bool { return isNameStart(c) || (c >= '0' && c <= '9') }

// next returns the next selected metric name.
func (s *scanner) next() (string, bool) {
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		switch {
		case c == '"' || c == '\'' || c == '`':
			s.skipString(c)
		case c == '{':
			s.skipTo('}')
		case c == '[':
			s.skipTo(']')
		case c == '#':
			s.skipTo('\n')
		case c == '$':
			s.pos++
			if s.pos < len(s.src) && s.src[s.pos] == '{' {
				s.skipTo('}')
				continue
			}
			s.skipName()
		case c >= '0' && c <= '9' || c == '.':
			// A number or a duration (5m, 1h30m, 1e3, 0x1f).
			for s.pos < len(s.src) && (isNameChar(s.src[s.pos]) || s.src[s.pos] == '.') {
				s.pos++
			}
		case isNameStart(c):
			start := s.pos
			s.skipName()
			word := s.src[start:s.pos]
			lower := strings.ToLower(word)
			if labelLists[lower] {
				s.skipSpace()
				if s.pos < len(s.src) && s.src[s.pos] == '(' {
					s.skipTo(')')
				}
				continue
			}
			if keywords[lower] {
				continue
			}
			s.skipSpace()
			if s.pos < len(s.src) && s.src[s.pos] == '(' {
				continue // a function or aggregation
			}
			if s.aggregationClause() {
				continue // sum by (l) (...): an aggregation, its clause first
			}
			return word, true
		default:
			s.pos++
		}
	}
	return "", false
}

// aggregationClause reports whether by or without follows at pos.
func (s *scanner) aggregationClause() bool {
	rest := strings.ToLower(s.src[s.pos:])
	for _, kw := range []string{"by", "without"} {
		if strings.HasPrefix(rest, kw) && (len(rest) == len(kw) || !isNameChar(rest[len(kw)])) {
			return true
		}
	}
	return false
}

func (s *scanner) skipName() {
	for s.pos < len(s.src) && isNameChar(s.src[s.pos]) {
		s.pos++
	}
}

func (s *scanner) skipSpace() {
	for s.pos < len(s.src) && strings.IndexByte(" \t\r\n", s.src[s.pos]) >= 0 {
		s.pos++
	}
}

// skipString moves past a string literal that starts at pos; backslash
// escapes count except in raw (backquoted) strings.
func (s *scanner) skipString(q byte) {
	s.pos++
	for s.pos < len(s.src) {
		c := s.src[s.pos]
		s.pos++
		switch {
		case c == '\\' && q != '`':
			s.pos++
		case c == q:
			return
		}
	}
}

// skipTo moves past the next end byte, stepping over strings (a label
// value may hold the byte).
func (s *scanner) skipTo(end byte) {
	s.pos++
	for s.pos < len(s.src) {
		switch c := s.src[s.pos]; c {
		case '"', '\'', '`':
			s.skipString(c)
		case end:
			s.pos++
			return
		default:
			s.pos++
		}
	}
}
