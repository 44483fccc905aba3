package httpapi

import "encoding/json"

// callScanner follows a forced call reply byte by byte as it is
// generated: {"name":"...","arguments":...} (or, parallel, an array of
// those), with any whitespace the engine allows between tokens. Once a
// call's name is complete its arguments can go out as they arrive, as
// OpenAI streams them: the arguments are the exact bytes of their JSON
// value, so what a stream sent concatenates to what a whole response
// holds. The engine generates a call's properties in the schema's order
// (name first); arguments that came first are held until the name.
//
// A reply that leaves this shape (a worker that ignored the constraint)
// turns the scanner bad at the first byte that does not fit; what was
// scanned before stays.
type callScanner struct {
	parallel bool
	st       scanState
	// str is the JSON string being read (a key or the name), quotes
	// included; esc: its last byte was a backslash.
	str []byte
	esc bool
	key string
	// The arguments value being read: its nesting depth, whether it is
	// inside a string, and whether it is a bare scalar (a number or
	// literal, which ends at the first delimiter).
	depth  int
	inStr  bool
	scalar bool
	calls  []scannedCall
}

// scannedCall is one call of the reply.
type scannedCall struct {
	name      string
	named     bool
	args      []byte
	argsBegun bool
	argsDone  bool
	// sent counts the argument bytes a stream has sent; announced: the
	// stream has sent the call's id and name.
	sent      int
	announced bool
	id        string
}

type scanState uint8

const (
	sDoc         scanState = iota // before the value
	sCallStart                    // after '[' or ',' between calls: a '{'
	sKey                          // a member's key
	sKeyStr                       // inside the key
	sColon                        // after the key
	sValue                        // before the member's value
	sNameStr                      // inside the name
	sArgs                         // inside the arguments
	sAfterMember                  // ',' or '}'
	sAfterCall                    // parallel: ',' or ']'
	sEnd                          // the whole reply was read
	sBad                          // the reply is not a call
)

func newCallScanner(parallel bool) *callScanner { return &callScanner{parallel: parallel} }

// feed scans more of the reply.
func (s *callScanner) feed(text string) {
	for i := 0; i < len(text) && s.st != sBad; i++ {
		s.step(text[i])
	}
}

// done reports whether the reply is complete.
func (s *callScanner) done() bool { return s.st == sEnd }

// bad reports whether the reply is not a call.
func (s *callScanner) bad() bool { return s.st == sBad }

// named returns the calls whose names are complete, in order: the ones a
// reply reports.
func (s *callScanner) named() []*scannedCall {
	var out []*scannedCall
	for i := range s.calls {
		if s.calls[i].named {
			out = append(out, &s.calls[i])
		}
	}
	return out
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

func (s *callScanner) cur() *scannedCall { return &s.calls[len(s.calls)-1] }

func (s *callScanner) step(b byte) {
	switch s.st {
	case sDoc, sCallStart:
		s.start(b)
	case sKey:
		s.str = s.str[:0]
		s.expect(b, '"', sKeyStr)
		if s.st == sKeyStr {
			s.str = append(s.str, b)
		}
	case sKeyStr, sNameStr:
		s.stringByte(b)
	case sColon:
		s.expect(b, ':', sValue)
	case sValue:
		s.value(b)
	case sArgs:
		s.argsByte(b)
	case sAfterMember:
		s.afterMember(b)
	case sAfterCall:
		switch {
		case isSpace(b):
		case b == ',':
			s.st = sCallStart
		case b == ']':
			s.st = sEnd
		default:
			s.st = sBad
		}
	case sEnd:
		if !isSpace(b) {
			s.st = sBad
		}
	}
}

// start reads the bytes before a call object.
func (s *callScanner) start(b byte) {
	switch {
	case isSpace(b):
	case b == '[' && s.parallel && s.st == sDoc:
		s.st = sCallStart
	case b == '{' && (s.st == sCallStart || !s.parallel):
		s.calls = append(s.calls, scannedCall{})
		s.st = sKey
	default:
		s.st = sBad
	}
}

// expect moves to next on want, skips whitespace, and is bad otherwise.
func (s *callScanner) expect(b, want byte, next scanState) {
	switch {
	case b == want:
		s.st = next
	case !isSpace(b):
		s.st = sBad
	}
}

// stringByte reads a key or the name up to its closing quote.
func (s *callScanner) stringByte(b byte) {
	s.str = append(s.str, b)
	switch {
	case s.esc:
		s.esc = false
		return
	case b == '\\':
		s.esc = true
		return
	case b != '"':
		return
	}
	var v string
	if json.Unmarshal(s.str, &v) != nil {
		s.st = sBad
		return
	}
	if s.st == sKeyStr {
		s.key, s.st = v, sColon
		return
	}
	c := s.cur()
	if v == "" {
		s.st = sBad
		return
	}
	c.name, c.named, s.st = v, true, sAfterMember
}

// value starts a member's value: the name's string or the arguments.
func (s *callScanner) value(b byte) {
	if isSpace(b) {
		return
	}
	c := s.cur()
	switch {
	case s.key == "name" && !c.named && b == '"':
		s.str, s.st = append(s.str[:0], b), sNameStr
	case s.key == "arguments" && !c.argsBegun:
		c.argsBegun = true
		s.depth, s.inStr, s.scalar = 0, false, false
		s.st = sArgs
		s.argsByte(b)
	default:
		s.st = sBad
	}
}

// argsByte reads one byte of the arguments' JSON value, tracking strings
// and brackets to find its end.
func (s *callScanner) argsByte(b byte) {
	c := s.cur()
	if s.scalar && (isSpace(b) || b == ',' || b == '}' || b == ']') {
		c.argsDone = true
		s.st = sAfterMember
		s.afterMember(b)
		return
	}
	c.args = append(c.args, b)
	first := len(c.args) == 1
	switch {
	case s.inStr:
		switch {
		case s.esc:
			s.esc = false
		case b == '\\':
			s.esc = true
		case b == '"':
			s.inStr = false
		}
	case b == '"':
		s.inStr = true
	case b == '{' || b == '[':
		s.depth++
	case b == '}' || b == ']':
		s.depth--
	case first:
		s.scalar = true
	}
	if s.depth < 0 {
		s.st = sBad
		return
	}
	if !s.inStr && !s.scalar && s.depth == 0 {
		c.argsDone = true
		s.st = sAfterMember
	}
}

// afterMember reads what follows a member: the next one or the call's end.
func (s *callScanner) afterMember(b byte) {
	c := s.cur()
	switch {
	case isSpace(b):
	case b == ',':
		s.st = sKey
	case b == '}' && c.named && c.argsDone:
		s.st = sEnd
		if s.parallel {
			s.st = sAfterCall
		}
	default:
		s.st = sBad
	}
}
