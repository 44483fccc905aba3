package llama

import "sync"

// panelCols is the column width of the panels the classifier (dim x
// vocab, the widest matrix by far) is stored in. One panel, dim x
// panelCols floats, stays in cache while every sampled row of a step is
// multiplied with it, so a step streams the classifier from memory once,
// not once per row, and the panels split evenly across threads. For
// stories15M's shape the classifier is 37 MB, over half the weights.
const panelCols = 512

// panels is an n x p row-major matrix stored as column panels: panel j
// holds columns [j*panelCols, min((j+1)*panelCols, p)), itself row-major.
// Every output element sums over k in the same order as the unpacked
// product, so results are bit-identical to it (TestPanelsExact).
type panels struct {
	n, p int
	data [][]float32
}

func packPanels(w []float32, n, p int) *panels {
	pn := &panels{n: n, p: p}
	for c0 := 0; c0 < p; c0 += panelCols {
		width := min(panelCols, p-c0)
		d := make([]float32, n*width)
		for k := range n {
			copy(d[k*width:(k+1)*width], w[k*p+c0:k*p+c0+width])
		}
		pn.data = append(pn.data, d)
	}
	return pn
}

// mul computes dst (m x p) = x (m x n) * the matrix with mm, fanning the
// panels out over up to threads goroutines; tmp holds one m x panelCols
// buffer per goroutine.
func (pn *panels) mul(mm matmul, dst, x []float32, m, threads int, tmp *[][]float32) {
	workers := max(1, min(threads, len(pn.data)))
	for len(*tmp) < workers {
		*tmp = append(*tmp, nil)
	}
	run := func(w int) {
		buf := grow((*tmp)[w], m*panelCols)
		(*tmp)[w] = buf
		for j := w; j < len(pn.data); j += workers {
			c0 := j * panelCols
			width := min(panelCols, pn.p-c0)
			out := buf[:m*width]
			mm(out, x, pn.data[j], m, pn.n, width)
			for i := range m {
				copy(dst[i*pn.p+c0:i*pn.p+c0+width], out[i*width:(i+1)*width])
			}
		}
	}
	if workers == 1 {
		run(0)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() { run(w) })
	}
	wg.Wait()
}
