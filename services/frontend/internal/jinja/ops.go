package jinja

import (
	"fmt"
	"math"
	"strings"
)

func (s *state) unary(e unaryExpr, f *frame) (any, error) {
	x, err := s.eval(e.x, f)
	if err != nil {
		return nil, err
	}
	switch e.op {
	case "not":
		return !truthy(x), nil
	case "-":
		switch v := x.(type) {
		case int64:
			return -v, nil
		case float64:
			return -v, nil
		case bool:
			if v {
				return int64(-1), nil
			}
			return int64(0), nil
		}
	case "+":
		if _, ok := number(x); ok {
			return x, nil
		}
	}
	return nil, fmt.Errorf("bad operand type for unary %s: '%s'", e.op, typeName(x))
}

func (s *state) binary(e binExpr, f *frame) (any, error) {
	l, err := s.eval(e.l, f)
	if err != nil {
		return nil, err
	}
	switch e.op {
	case "and":
		if !truthy(l) {
			return l, nil
		}
		return s.eval(e.r, f)
	case "or":
		if truthy(l) {
			return l, nil
		}
		return s.eval(e.r, f)
	}
	r, err := s.eval(e.r, f)
	if err != nil {
		return nil, err
	}
	return s.arith(e.op, l, r)
}

func (s *state) compareChain(e compareExpr, f *frame) (any, error) {
	l, err := s.eval(e.first, f)
	if err != nil {
		return nil, err
	}
	for i, op := range e.ops {
		r, err := s.eval(e.rights[i], f)
		if err != nil {
			return nil, err
		}
		ok, err := compareOp(op, l, r)
		if err != nil || !ok {
			return false, err
		}
		l = r
	}
	return true, nil
}

func compareOp(op string, l, r any) (bool, error) {
	switch op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "in":
		return contains(r, l)
	case "not in":
		ok, err := contains(r, l)
		return !ok, err
	}
	c, err := compare(l, r)
	if err != nil {
		return false, err
	}
	switch op {
	case "<":
		return c < 0, nil
	case ">":
		return c > 0, nil
	case "<=":
		return c <= 0, nil
	}
	return c >= 0, nil
}

// arith is Python's binary operators (and Jinja's ~).
func (s *state) arith(op string, l, r any) (any, error) {
	if v, ok, err := s.arithSeq(op, l, r); ok || err != nil {
		return v, err
	}
	ai, aInt := integer(l)
	bi, bInt := integer(r)
	af, aNum := number(l)
	bf, bNum := number(r)
	if !aNum || !bNum {
		return nil, fmt.Errorf("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(l), typeName(r))
	}
	if aInt && bInt {
		return s.intArith(op, ai, bi)
	}
	switch op {
	case "+":
		return af + bf, nil
	case "-":
		return af - bf, nil
	case "*":
		return af * bf, nil
	case "/":
		if bf == 0 {
			return nil, fmt.Errorf("division by zero")
		}
		return af / bf, nil
	case "//", "%":
		if bf == 0 {
			return nil, fmt.Errorf("float division or modulo by zero")
		}
		q := math.Floor(af / bf)
		if op == "//" {
			return q, nil
		}
		return af - q*bf, nil
	case "**":
		return math.Pow(af, bf), nil
	}
	return nil, fmt.Errorf("unknown operator %s", op)
}

// arithSeq is the operators on strings and lists: ~, concatenation,
// repetition and %-formatting; ok is false for other operands.
func (s *state) arithSeq(op string, l, r any) (any, bool, error) {
	switch op {
	case "~":
		ls, rs := str(l), str(r)
		if err := s.grow(len(ls) + len(rs)); err != nil {
			return nil, true, err
		}
		return ls + rs, true, nil
	case "+":
		switch a := l.(type) {
		case string:
			if b, ok := r.(string); ok {
				if err := s.grow(len(a) + len(b)); err != nil {
					return nil, true, err
				}
				return a + b, true, nil
			}
		case *List:
			if b, ok := r.(*List); ok {
				if err := s.tick(len(a.Items) + len(b.Items)); err != nil {
					return nil, true, err
				}
				return &List{Items: append(append([]any{}, a.Items...), b.Items...)}, true, nil
			}
		}
	case "*":
		if v, ok, err := s.repeat(l, r); ok || err != nil {
			return v, true, err
		}
		return s.repeat(r, l)
	case "%":
		if format, ok := l.(string); ok {
			args := []any{r}
			if lst, ok := r.(*List); ok {
				args = lst.Items
			}
			v, err := s.percent(format, args)
			return v, true, err
		}
	}
	return nil, false, nil
}

// intArith is the operators on two integers; / is true division and
// // and % floor, as in Python.
func (s *state) intArith(op string, a, b int64) (any, error) {
	switch op {
	case "+":
		return a + b, nil
	case "-":
		return a - b, nil
	case "*":
		return a * b, nil
	case "/":
		if b == 0 {
			return nil, fmt.Errorf("division by zero")
		}
		return float64(a) / float64(b), nil
	case "//", "%":
		if b == 0 {
			return nil, fmt.Errorf("integer division or modulo by zero")
		}
		q, m := a/b, a%b
		if m != 0 && (m < 0) != (b < 0) {
			q, m = q-1, m+b
		}
		if op == "//" {
			return q, nil
		}
		return m, nil
	case "**":
		if b < 0 {
			return math.Pow(float64(a), float64(b)), nil
		}
		if err := s.tick(int(min(b, int64(s.maxSteps)))); err != nil {
			return nil, err
		}
		out := int64(1)
		for range b {
			out *= a
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown operator %s", op)
}

// repeat is seq * n for a string or list seq.
func (s *state) repeat(seq, n any) (any, bool, error) {
	k, ok := integer(n)
	if !ok {
		return nil, false, nil
	}
	k = max(k, 0)
	switch v := seq.(type) {
	case string:
		if k > 0 && int64(len(v)) > int64(s.maxString)/k {
			return nil, true, fmt.Errorf("%w: a string of more than %d bytes", ErrLimit, s.maxString)
		}
		if err := s.grow(len(v) * int(k)); err != nil {
			return nil, true, err
		}
		return strings.Repeat(v, int(k)), true, nil
	case *List:
		if k > 0 && int64(len(v.Items)) > int64(s.maxSteps)/k {
			return nil, true, fmt.Errorf("%w: a list of more than %d items", ErrLimit, s.maxSteps)
		}
		if err := s.tick(len(v.Items) * int(k)); err != nil {
			return nil, true, err
		}
		out := &List{}
		for range k {
			out.Items = append(out.Items, v.Items...)
		}
		return out, true, nil
	}
	return nil, false, nil
}

// percent is Python's printf-style format % args, for %s %d %i %f %r
// %x and %% with flags, width and precision.
func (s *state) percent(format string, args []any) (any, error) {
	var b strings.Builder
	next := 0
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("-+ #0123456789.", format[j]) >= 0 {
			j++
		}
		if j >= len(format) {
			return nil, fmt.Errorf("incomplete format")
		}
		verb, spec := format[j], format[i+1:j]
		if err := checkWidths(spec); err != nil {
			return nil, err
		}
		i = j
		if verb == '%' {
			b.WriteByte('%')
			continue
		}
		if next >= len(args) {
			return nil, fmt.Errorf("not enough arguments for format string")
		}
		a := args[next]
		next++
		switch verb {
		case 's':
			fmt.Fprintf(&b, "%"+spec+"s", str(a))
		case 'r':
			var r strings.Builder
			writeRepr(&r, a)
			fmt.Fprintf(&b, "%"+spec+"s", r.String())
		case 'd', 'i', 'x', 'X', 'o':
			n, ok := number(a)
			if !ok {
				return nil, fmt.Errorf("%%%c format: a number is required, not %s", verb, typeName(a))
			}
			v := verb
			if v == 'i' {
				v = 'd'
			}
			fmt.Fprintf(&b, "%"+spec+string(v), int64(n))
		case 'f', 'F', 'e', 'E', 'g', 'G':
			n, ok := number(a)
			if !ok {
				return nil, fmt.Errorf("%%%c format: a number is required, not %s", verb, typeName(a))
			}
			if !strings.Contains(spec, ".") && (verb == 'f' || verb == 'F' || verb == 'e' || verb == 'E') {
				spec += ".6"
			}
			fmt.Fprintf(&b, "%"+spec+string(verb), n)
		default:
			return nil, fmt.Errorf("unsupported format character '%c'", verb)
		}
	}
	if err := s.grow(b.Len()); err != nil {
		return nil, err
	}
	return b.String(), nil
}

// checkWidths refuses a format's width or precision over 4096, which
// would build a string of that many bytes before any limit saw it.
func checkWidths(spec string) error {
	n := 0
	for i := range len(spec) {
		if c := spec[i]; c >= '0' && c <= '9' {
			if n = n*10 + int(c-'0'); n > 4096 {
				return fmt.Errorf("format width or precision over 4096")
			}
			continue
		}
		n = 0
	}
	return nil
}
