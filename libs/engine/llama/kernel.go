package llama

import (
	"fmt"

	"github.com/viterin/vek/vek32"
)

// Kernel selects the matrix-product implementation.
type Kernel int

const (
	// KernelSIMD uses github.com/viterin/vek (AVX2+FMA assembly where the
	// CPU has it, vek's own Go loops otherwise).
	KernelSIMD Kernel = iota
	// KernelGo is plain Go with run.c's operation order; on amd64 (where
	// Go never fuses multiply-add) it also has run.c's rounding. Slower.
	KernelGo
)

func (k Kernel) String() string {
	switch k {
	case KernelSIMD:
		return "simd"
	case KernelGo:
		return "go"
	}
	return fmt.Sprintf("kernel(%d)", int(k))
}

// matmul computes dst (m x p) = x (m x n) * w (n x p). Both kernels sum
// each output over k = 0..n-1 in order and each row independently of the
// others, so a token's result never depends on the rest of the batch.
type matmul func(dst, x, w []float32, m, n, p int)

func (k Kernel) matmul() matmul {
	if k == KernelGo {
		return matmulGo
	}
	return matmulSIMD
}

// expInPlace replaces every x[i] with e^x[i] via expf32 for both kernels
// (vek's vectorized exp returns garbage for the large negative inputs
// softmax produces, so it is not used).
func (k Kernel) expInPlace() func([]float32) { return expGo }

func expGo(x []float32) {
	for i, v := range x {
		x[i] = expf32(v)
	}
}

// simdRows caps the rows per vek call: vek splits bigger products across
// goroutines, which costs more than it saves at these sizes and competes
// with the engine's other work.
const simdRows = 3

func matmulSIMD(dst, x, w []float32, m, n, p int) {
	for i := 0; i < m; i += simdRows {
		r := min(simdRows, m-i)
		vek32.MatMul_Into(dst[i*p:(i+r)*p], x[i*n:(i+r)*n], w[:n*p], n)
	}
}

// goTile is how many batch rows share one pass over the weights; their
// outputs stay in L1 while each weight row is streamed once per tile.
const goTile = 8

// matmulGo is weight-stationary: for each input feature k the weight row
// w[k] is loaded once and applied to every row of the tile.
func matmulGo(dst, x, w []float32, m, n, p int) {
	for i0 := 0; i0 < m; i0 += goTile {
		i1 := min(i0+goTile, m)
		clear(dst[i0*p : i1*p])
		for k := range n {
			row := w[k*p : (k+1)*p]
			for i := i0; i < i1; i++ {
				xv := x[i*n+k]
				out := dst[i*p : (i+1)*p]
				for j := range out {
					out[j] += xv * row[j]
				}
			}
		}
	}
}
