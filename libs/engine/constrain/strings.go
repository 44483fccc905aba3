package constrain

// A string frame's b packs the escape state (low nibble) and the UTF-8
// state (high nibble). Escapes: 1 after a backslash; 2..6 inside \uXXXX
// with 4, 3 (after d: the next digit 0-7, so no surrogate escapes), 3, 2, 1
// hex digits to go. UTF-8: the continuation bytes still owed, 1..3, or 4..7
// after the lead bytes E0, ED, F0, F4, whose next byte has a narrower range
// (no overlong forms, no surrogates, nothing past U+10FFFF).
const (
	escBackslash = 1
	escU4        = 2
	escU3D       = 3
	escU3        = 4
	escU2        = 5
	escU1        = 6
)

// u8Range is the contRange index of the next byte in each UTF-8 state, and
// u8Next the state after it.
var (
	u8Range = [8]uint8{0, 0, 0, 0, 1, 2, 3, 4}
	u8Next  = [8]int32{0, 0, 1, 2, 1, 1, 2, 2}
)

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// u8Lead is the UTF-8 state after lead byte c, 0 for ASCII, -1 for a byte
// that cannot start a character.
func u8Lead(c byte) int32 {
	switch {
	case c < 0x80:
		return 0
	case c >= 0xC2 && c <= 0xDF:
		return 1
	case c == 0xE0:
		return 4
	case c == 0xED:
		return 5
	case c >= 0xE1 && c <= 0xEF:
		return 2
	case c == 0xF0:
		return 6
	case c >= 0xF1 && c <= 0xF3:
		return 3
	case c == 0xF4:
		return 7
	}
	return -1
}

// strStep advances string frame f by byte c.
func (m *Matcher) strStep(out []head, f frame, c byte) []head {
	n := &m.g.nodes[f.node]
	esc, u8 := f.b&15, f.b>>4
	switch {
	case u8 != 0:
		if r := contRange[u8Range[u8]]; c < r[0] || c > r[1] {
			return out
		}
		u8 = u8Next[u8]
	case esc == escBackslash:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			esc = 0
		case 'u':
			esc = escU4
		default:
			return out
		}
	case esc != 0:
		switch {
		case !isHex(c), esc == escU3D && (c < '0' || c > '7'):
			return out
		case esc == escU4 && (c == 'd' || c == 'D'):
			esc = escU3D
		case esc == escU4:
			esc = escU3
		case esc == escU3D:
			esc = escU2
		case esc == escU1:
			esc = 0
		default:
			esc++
		}
	case c == '"':
		if f.a < n.min {
			return out
		}
		return append(out, head{top: *f.parent})
	case c < 0x20:
		return out
	default:
		if n.max >= 0 && f.a >= n.max {
			return out
		}
		f.a++
		if c == '\\' {
			esc = escBackslash
		} else if u8 = u8Lead(c); u8 < 0 {
			return out
		}
	}
	f.b = esc | u8<<4
	return m.push(out, f)
}

// strOwn is the cost of finishing string frame f: the pending escape or
// character, the characters minLength still asks for, the closing quote.
func (c *costs) strOwn(n *node, f *frame) int32 {
	s := add(c.ch['"'], mul(n.min-f.a, c.strChar))
	switch f.b & 15 {
	case escBackslash:
		s = add(s, c.escLetter)
	case escU4:
		s = add(s, min(add(c.hexND, mul(3, c.hex)), add(min(c.ch['d'], c.ch['D']), add(c.hex07, mul(2, c.hex)))))
	case escU3D:
		s = add(s, add(c.hex07, mul(2, c.hex)))
	case escU3:
		s = add(s, mul(3, c.hex))
	case escU2:
		s = add(s, mul(2, c.hex))
	case escU1:
		s = add(s, c.hex)
	}
	switch u8 := f.b >> 4; u8 {
	case 0:
	case 1, 2, 3:
		s = add(s, mul(u8, c.cont[0]))
	default:
		s = add(s, add(c.cont[u8Range[u8]], mul(u8Next[u8], c.cont[0])))
	}
	return s
}
