package llama

// stripCols is the width of the strips the SIMD kernel stores weights in:
// one strip is n x 16 floats, contiguous, so the 4x16 kernel streams it
// once per four rows and it stays in L1 while every row of the step
// passes (weight-stationary: a batch reads each weight from memory once).
const stripCols = 16

// strips is an n x p row-major matrix stored as ceil(p/16) strips of
// n x 16 floats, the last padded with zero columns.
type strips struct {
	n, p int
	data []float32
}

func packStrips(w []float32, n, p int) *strips {
	ns := (p + stripCols - 1) / stripCols
	s := &strips{n: n, p: p, data: make([]float32, ns*n*stripCols)}
	for j := range ns {
		c0 := j * stripCols
		width := min(stripCols, p-c0)
		strip := s.data[j*n*stripCols:]
		for k := range n {
			copy(strip[k*stripCols:k*stripCols+width], w[k*p+c0:k*p+c0+width])
		}
	}
	return s
}

func (s *strips) count() int { return len(s.data) / (s.n * stripCols) }

// mul computes the columns of strips [j0, j1) of dst (m x p) = x (m x n)
// * the matrix. Every output is a chain of fused multiply-adds over k in
// order, from zero, whatever m and the strip range: a row's result never
// depends on the rest of the batch.
func (s *strips) mul(dst, x []float32, m, j0, j1 int) {
	n, p := s.n, s.p
	if m == 0 || n == 0 {
		return
	}
	_ = x[m*n-1]
	_ = dst[m*p-1]
	var tile [4 * stripCols]float32
	for j := j0; j < j1; j++ {
		strip := &s.data[j*n*stripCols]
		c0 := j * stripCols
		width := min(stripCols, p-c0)
		i := 0
		if width == stripCols {
			for ; i+4 <= m; i += 4 {
				sgemm4x16(&x[i*n], n, strip, n, &dst[i*p+c0], p)
			}
		} else {
			for ; i+4 <= m; i += 4 {
				sgemm4x16(&x[i*n], n, strip, n, &tile[0], stripCols)
				for r := range 4 {
					copy(dst[(i+r)*p+c0:(i+r)*p+c0+width], tile[r*stripCols:])
				}
			}
		}
		for ; i < m; i++ {
			sgemm1x16(&x[i*n], strip, n, &tile[0])
			copy(dst[i*p+c0:i*p+c0+width], tile[:width])
		}
	}
}

// layerStrips is one layer's matrices packed for the strip kernel.
type layerStrips struct{ q, k, v, o, w1, w2, w3 *strips }

func packLayers(m *Model) ([]layerStrips, *strips) {
	c, w := m.Config, &m.Weights
	d, kvd, h := c.Dim, c.KVDim(), c.HiddenDim
	ls := make([]layerStrips, c.NLayers)
	for l := range ls {
		ls[l] = layerStrips{
			q: packStrips(w.WqT[l*d*d:], d, d), k: packStrips(w.WkT[l*d*kvd:], d, kvd), v: packStrips(w.WvT[l*d*kvd:], d, kvd),
			o: packStrips(w.WoT[l*d*d:], d, d), w1: packStrips(w.W1T[l*d*h:], d, h), w3: packStrips(w.W3T[l*d*h:], d, h),
			w2: packStrips(w.W2T[l*h*d:], h, d),
		}
	}
	return ls, packStrips(w.WclsT, d, c.VocabSize)
}
