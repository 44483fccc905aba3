package llama

import "math"

// expTable[j] = 2^(j/32), the table of expf32's reduction.
var expTable = func() (t [32]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / 32)
	}
	return t
}()

// expf32 returns e^x rounded to float32. It evaluates in float64 with a
// relative error near 1e-15, so after rounding it equals
// float32(math.Exp(float64(x))) except in cases rarer than one in 10^7
// (a value within 1e-15 of a float32 rounding boundary), at about a third
// of the cost. Softmax and SwiGLU call it thousands of times per token.
func expf32(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 88.8:
		return float32(math.Inf(1))
	case x < -104:
		return 0
	}
	const (
		invLn2x32 = 32 / math.Ln2
		ln2d32    = math.Ln2 / 32
		shifter   = 0x1.8p52
	)
	z := float64(x)*invLn2x32 + shifter
	k := int64(math.Float64bits(z)) // low bits hold round(x*32/ln2)
	kf := z - shifter
	r := float64(x) - kf*ln2d32 // |r| <= ln2/64
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720))))))
	n := int32(k) >> 5
	scale := math.Float64frombits(uint64(int64(n)+1023) << 52)
	return float32(expTable[k&31] * p * scale)
}
