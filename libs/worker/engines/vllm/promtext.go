package vllm

import (
	"bytes"
	"errors"
	"strconv"
)

// scanSamples calls fn for every sample line of a Prometheus text scrape
// whose metric name want accepts, with the raw label set (between the
// braces, possibly empty) and the value. Lines it cannot read (comments,
// exemplars, quoted UTF-8 names, garbage) are skipped: only the named
// gauges matter, and one odd line must not hide them.
func scanSamples(text []byte, want func(name []byte) bool, fn func(name string, labels []byte, v float64)) {
	for len(text) > 0 {
		line := text
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			text = nil
		}
		line = bytes.TrimLeft(line, " \t")
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		n := 0
		for n < len(line) && isNameByte(line[n], n == 0) {
			n++
		}
		if n == 0 || !want(line[:n]) {
			continue
		}
		name, rest := string(line[:n]), line[n:]
		var labels []byte
		if len(rest) > 0 && rest[0] == '{' {
			end := labelsEnd(rest)
			if end < 0 {
				continue
			}
			labels, rest = rest[1:end], rest[end+1:]
		}
		fields := bytes.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(string(fields[0]), 64)
		if err != nil {
			continue
		}
		fn(name, labels, v)
	}
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

// labelsEnd returns the index of the '}' closing the label set that
// starts at s[0] == '{', skipping quoted values; -1 if there is none.
func labelsEnd(s []byte) int {
	quoted := false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == '}':
			return i
		}
	}
	return -1
}

var errLabels = errors.New("malformed label set")

// parseLabels reads `name="value",...` (the text between the braces).
func parseLabels(s []byte) (map[string]string, error) {
	out := map[string]string{}
	for {
		s = bytes.TrimLeft(s, " \t,")
		if len(s) == 0 {
			return out, nil
		}
		eq := bytes.IndexByte(s, '=')
		if eq <= 0 {
			return nil, errLabels
		}
		name := string(bytes.TrimSpace(s[:eq]))
		s = bytes.TrimLeft(s[eq+1:], " \t")
		if len(s) == 0 || s[0] != '"' {
			return nil, errLabels
		}
		var val []byte
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] != '\\' {
				val = append(val, s[i])
				continue
			}
			if i++; i == len(s) {
				return nil, errLabels
			}
			switch s[i] {
			case 'n':
				val = append(val, '\n')
			default: // \\ and \"
				val = append(val, s[i])
			}
		}
		if i == len(s) {
			return nil, errLabels
		}
		out[name] = string(val)
		s = s[i+1:]
	}
}
