package constrain

// Digit caps keep a sampler from producing endless numbers; they also keep
// every generated number exact in a float64 (integers in an int64).
const (
	// MaxIntDigits caps the digits before the point.
	MaxIntDigits = 15
	// MaxFracDigits caps the digits after the point of an unbounded number.
	MaxFracDigits = 15
	// MaxExpDigits caps the exponent's digits (|exponent| <= 99).
	MaxExpDigits = 2
	// BoundedFracDigits is the precision of a number with minimum/maximum:
	// at most this many digits after the point, no exponent, and bounds
	// rounded inward to it.
	BoundedFracDigits = 6
)

var pow10 = func() (p [19]int64) {
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// intCap is the number of integer digits n allows: fewer when bounded, so
// that the scaled value fits an int64.
func intCap(n *node) int {
	if !n.bounded {
		return MaxIntDigits
	}
	return min(MaxIntDigits, 18-int(n.scale))
}

// A number frame: pos is the phase, flags&flagNeg the sign, a the integer
// digits so far, b the fraction (or exponent) digits, v the integer value
// (bounded, before the point) or the value scaled by 10^scale (after it).
const flagNeg = 1

// numStep advances number frame f of node n by byte c.
func numStep(f frame, n *node, c byte) (frame, bool) {
	switch f.pos {
	case pNumSign:
		if c < '0' || c > '9' {
			return f, false
		}
		f.a, f.v, f.pos = 1, int64(c-'0'), pNumInt
		if c == '0' {
			f.pos = pNumZero
		}
		return f, true
	case pNumZero, pNumInt:
		return intStep(f, n, c)
	case pNumDot, pNumFrac:
		return fracStep(f, n, c)
	}
	return expStep(f, c)
}

func intStep(f frame, n *node, c byte) (frame, bool) {
	switch {
	case c >= '0' && c <= '9' && f.pos == pNumInt && int(f.a) < intCap(n):
		f.a++
		f.v = f.v*10 + int64(c-'0')
	case c == '.' && !n.integer && (!n.bounded || n.scale > 0):
		f.pos = pNumDot
	case (c == 'e' || c == 'E') && !n.integer && !n.bounded:
		f.pos = pNumExp
	default:
		return f, false
	}
	return f, true
}

func fracStep(f frame, n *node, c byte) (frame, bool) {
	digit := c >= '0' && c <= '9'
	d := int64(c - '0')
	switch {
	case digit && f.pos == pNumDot:
		f.pos, f.b = pNumFrac, 1
		if n.bounded {
			f.v = f.v*pow10[n.scale] + d*pow10[n.scale-1]
		}
	case digit && n.bounded && int(f.b) < int(n.scale):
		f.b++
		f.v += d * pow10[int(n.scale)-int(f.b)]
	case digit && !n.bounded && f.b < MaxFracDigits:
		f.b++
	case (c == 'e' || c == 'E') && f.pos == pNumFrac && !n.bounded:
		f.pos = pNumExp
	default:
		return f, false
	}
	return f, true
}

func expStep(f frame, c byte) (frame, bool) {
	digit := c >= '0' && c <= '9'
	switch {
	case f.pos == pNumExp && (c == '+' || c == '-'):
		f.pos = pNumExpSign
	case (f.pos == pNumExp || f.pos == pNumExpSign) && digit:
		f.pos, f.b = pNumExpDig, 1
	case f.pos == pNumExpDig && digit && f.b < MaxExpDigits:
		f.b++
	default:
		return f, false
	}
	return f, true
}

// numOwn is the completion cost of number frame f.
func (c *costs) numOwn(n *node, f *frame) int32 {
	return c.numCost(n, f.flags&flagNeg != 0, f.pos, int(f.a), f.v, int(f.b))
}

// numCost is the cheapest completion of a number in phase with k integer
// digits of value v (or scaled value v after the point, j fraction
// digits). Unbounded, a phase that needs a digit costs one; bounded, it is
// the fewest digits (and point) that reach a value in range, or inf when
// none can.
func (c *costs) numCost(n *node, neg bool, phase uint8, k int, v int64, j int) int32 {
	if !n.bounded {
		switch phase {
		case pNumSign, pNumDot, pNumExp, pNumExpSign:
			return c.digit
		}
		return 0
	}
	lo, hi := n.lo, n.hi // the magnitudes this sign can reach
	if neg {
		lo, hi = -n.hi, -n.lo
	}
	lo = max(lo, 0)
	if lo > hi {
		return inf
	}
	d := int(n.scale)
	s := pow10[d]
	switch phase {
	case pNumDot:
		return c.fracCost(lo, hi, v*s, s, d, 0)
	case pNumFrac:
		if lo <= v && v <= hi {
			return 0
		}
		return c.fracCost(lo, hi, v, pow10[d-j], d, j)
	}
	best := inf
	for m := 0; k+m <= intCap(n); m++ {
		cost := mul(int32(m), c.digit)
		if cost >= best {
			break
		}
		var qlo, qhi int64
		switch {
		case k == 0 && m == 0:
			continue
		case k == 0 && m == 1:
			qlo, qhi = 0, 9
		case k == 0:
			qlo, qhi = pow10[m-1], pow10[m]-1
		case m > 0 && v == 0: // a leading zero takes no more digits
			return best
		default:
			qlo = v * pow10[m]
			qhi = qlo + pow10[m] - 1
		}
		if max(qlo, (lo+s-1)/s) <= min(qhi, hi/s) {
			return min(best, cost)
		}
		if d > 0 {
			best = min(best, add(add(cost, c.ch['.']), c.fracCost(lo, hi, qlo*s, (qhi-qlo+1)*s, d, 0)))
		}
	}
	return best
}

// fracCost is the fewest further fraction digits that reach a magnitude in
// [lo, hi] from the scaled values [x, x+w) reachable with j digits so far.
func (c *costs) fracCost(lo, hi, x, w int64, d, j int) int32 {
	for jj := j + 1; jj <= d; jj++ {
		u := pow10[d-jj]
		a, b := max(lo, x), min(hi, x+w-u)
		if a <= b && (a+u-1)/u*u <= b {
			return mul(int32(jj-j), c.digit)
		}
	}
	return inf
}
