package llama

import (
	"math"

	"switchyard.dev/libs/engine/internal/fastexp"
)

// expf32 returns e^x rounded to float32. It evaluates in float64
// (package fastexp, relative error below 2e-14), so after rounding it
// equals float32(math.Exp(float64(x))) except in cases rarer than one in
// 10^6 (a value that close to a float32 rounding boundary), at about a
// third of the cost. Softmax and SwiGLU call it thousands of times per
// token.
func expf32(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 88.8:
		return float32(math.Inf(1))
	case x < -104:
		return 0
	}
	return float32(fastexp.Exp(float64(x)))
}
