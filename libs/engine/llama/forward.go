package llama

import (
	"fmt"
	"math"
	"slices"
	"sync"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/sample"
)

// scratch holds per-step activations, one row per token of the step.
type scratch struct {
	rows    int
	tok     []uint32
	pos     []int
	item    []int
	x, xb   []float32
	xb2, q  []float32
	k, v    []float32
	hb, hb2 []float32
	tmp     []float32
	atts    [][]float32 // attention scores, one buffer per worker
	work    int         // attention positions this step
	workers int
	crew    *crew // the step's goroutines when workers > 1
	xs      []float32
	logits  []float32
	sampled []int // rows to classify
}

func grow(s []float32, n int) []float32 { return slices.Grow(s[:0], n)[:n] }

// plan validates the batch and lays its tokens out as rows.
func (e *Executor) plan(b *executor.Batch) error {
	s := &e.s
	s.tok, s.pos, s.item, s.sampled = s.tok[:0], s.pos[:0], s.item[:0], s.sampled[:0]
	for i := range b.Items {
		it := &b.Items[i]
		if it.Start < 0 || it.End <= it.Start || it.End > len(it.Tokens) || it.End > e.c.SeqLen {
			return fmt.Errorf("llama: item %d: positions [%d, %d) invalid for %d tokens, context %d", i, it.Start, it.End, len(it.Tokens), e.c.SeqLen)
		}
		if len(it.Blocks)*e.blockSize < it.End {
			return fmt.Errorf("llama: item %d: %d blocks cannot hold %d positions", i, len(it.Blocks), it.End)
		}
		for p := it.Start; p < it.End; p++ {
			if int(it.Tokens[p]) >= e.c.VocabSize {
				return fmt.Errorf("llama: item %d: token %d at %d out of vocab %d", i, it.Tokens[p], p, e.c.VocabSize)
			}
			s.tok = append(s.tok, it.Tokens[p])
			s.pos = append(s.pos, p)
			s.item = append(s.item, i)
		}
		if it.Sample {
			s.sampled = append(s.sampled, len(s.tok)-1)
		}
	}
	n, d, kvd, h := len(s.tok), e.c.Dim, e.c.KVDim(), e.c.HiddenDim
	s.rows = n
	s.x, s.xb, s.xb2, s.q = grow(s.x, n*d), grow(s.xb, n*d), grow(s.xb2, n*d), grow(s.q, n*d)
	s.k, s.v = grow(s.k, n*kvd), grow(s.v, n*kvd)
	s.hb, s.hb2, s.tmp = grow(s.hb, n*h), grow(s.hb2, n*h), grow(s.tmp, n*h)
	s.work = 0
	for _, p := range s.pos {
		s.work += p + 1
	}
	perRow := d*(d+2*kvd) + d*d + 3*d*h // a row's products in one layer
	s.workers = min(e.threads, n, max(1, (n*perRow+2*d*s.work)/e.parallelMACs))
	for len(s.atts) < s.workers {
		s.atts = append(s.atts, make([]float32, roundUp8(e.c.SeqLen)))
	}
	for r, t := range s.tok {
		copy(s.x[r*d:(r+1)*d], e.m.Weights.Embedding[int(t)*d:])
	}
	return nil
}

// layer runs transformer layer l over every row. Rows are split across
// workers in two phases: K/V of all rows are written before any row
// attends, because a prefill chunk's later rows read its earlier rows' K/V.
func (e *Executor) layer(b *executor.Batch, l int) {
	e.parallelRows(func(r0, r1 int, _ []float32) { e.qkv(b, l, r0, r1) })
	e.parallelRows(func(r0, r1 int, att []float32) { e.attendFFN(b, l, r0, r1, att) })
}

// qkv normalizes rows [r0, r1), projects Q, K, V, rotates, and stores
// K and V in the paged cache.
func (e *Executor) qkv(b *executor.Batch, l, r0, r1 int) {
	s, w, c := &e.s, &e.m.Weights, e.c
	n, d, kvd := r1-r0, c.Dim, c.KVDim()
	ps := e.strips(l)
	for r := r0; r < r1; r++ {
		rmsnorm(s.xb[r*d:(r+1)*d], s.x[r*d:(r+1)*d], w.RMSAtt[l*d:(l+1)*d])
	}
	xb := s.xb[r0*d : r1*d]
	e.lin(s.q[r0*d:r1*d], xb, n, ps.q, w.WqT[l*d*d:], d, d)
	e.lin(s.k[r0*kvd:r1*kvd], xb, n, ps.k, w.WkT[l*d*kvd:], d, kvd)
	e.lin(s.v[r0*kvd:r1*kvd], xb, n, ps.v, w.WvT[l*d*kvd:], d, kvd)
	for r := r0; r < r1; r++ {
		e.rope(s.q[r*d:(r+1)*d], s.k[r*kvd:(r+1)*kvd], s.pos[r])
		blocks := b.Items[s.item[r]].Blocks
		copy(e.kvRow(blocks, l, 0, s.pos[r]), s.k[r*kvd:(r+1)*kvd])
		copy(e.kvRow(blocks, l, 1, s.pos[r]), s.v[r*kvd:(r+1)*kvd])
	}
}

// attendFFN runs attention, the output projection and the SwiGLU
// feed-forward block for rows [r0, r1), with residual connections.
func (e *Executor) attendFFN(b *executor.Batch, l, r0, r1 int, att []float32) {
	s, w, c := &e.s, &e.m.Weights, e.c
	n, d, h := r1-r0, c.Dim, c.HiddenDim
	ps := e.strips(l)
	for r := r0; r < r1; r++ {
		e.attend(s.xb[r*d:(r+1)*d], s.q[r*d:(r+1)*d], att, b.Items[s.item[r]].Blocks, l, s.pos[r], e.simd)
	}
	x, xb, xb2 := s.x[r0*d:r1*d], s.xb[r0*d:r1*d], s.xb2[r0*d:r1*d]
	hb, hb2 := s.hb[r0*h:r1*h], s.hb2[r0*h:r1*h]
	e.lin(xb2, xb, n, ps.o, w.WoT[l*d*d:], d, d)
	addInto(x, xb2)
	for r := range n {
		rmsnorm(xb[r*d:(r+1)*d], x[r*d:(r+1)*d], w.RMSFFN[l*d:(l+1)*d])
	}
	e.lin(hb, xb, n, ps.w1, w.W1T[l*d*h:], d, h)
	e.lin(hb2, xb, n, ps.w3, w.W3T[l*d*h:], d, h)
	e.swiglu(hb, hb2, s.tmp[r0*h:r1*h])
	e.lin(xb, hb, n, ps.w2, w.W2T[l*h*d:], h, d)
	addInto(x, xb)
}

// classify computes logits for the rows that sample and draws tokens.
func (e *Executor) classify(b *executor.Batch) {
	s, w, d, v := &e.s, &e.m.Weights, e.c.Dim, e.c.VocabSize
	m := len(s.sampled)
	if m == 0 {
		return
	}
	s.xs, s.logits = grow(s.xs, m*d), grow(s.logits, m*v)
	for i, r := range s.sampled {
		rmsnorm(s.xs[i*d:(i+1)*d], s.x[r*d:(r+1)*d], w.RMSFinal)
	}
	e.classifier(s.logits, s.xs, m)
	for i, r := range s.sampled {
		it := &b.Items[s.item[r]]
		logits := s.logits[i*v : (i+1)*v]
		if it.Sampler == nil {
			it.Out = sample.Argmax(logits)
		} else {
			it.Out = it.Sampler.Sample(logits)
		}
	}
}

// strips returns layer l's packed matrices (all nil without the strip
// kernel).
func (e *Executor) strips(l int) layerStrips {
	if e.packed == nil {
		return layerStrips{}
	}
	return e.packed[l]
}

// lin computes dst (m x p) = x (m x n) * a layer matrix: with the strip
// kernel when the matrix is packed for it, else with e.mm over raw.
func (e *Executor) lin(dst, x []float32, m int, packed *strips, raw []float32, n, p int) {
	if packed != nil {
		packed.mul(dst, x, m, 0, packed.count())
		return
	}
	e.mm(dst, x, raw, m, n, p)
}

// classifier computes the logits of m normalized rows. With the strip
// kernel the column ranges split over threads (the classifier is the
// widest matrix; each thread streams its share of it once for all rows).
//
// It splits on its own terms, not the step's: the crew is sized by the
// step's per-layer work, so a one-row step of a large-vocabulary model
// gets none, yet its classifier (32000×288 for stories15M: more weights
// than all its layers) is worth a few goroutines. With a crew, every
// helper takes a share: they are already spinning, so a share costs
// nothing to hand out.
func (e *Executor) classifier(logits, xs []float32, m int) {
	if e.clsStrips == nil {
		e.mm(logits, xs, e.m.Weights.WclsT, m, e.c.Dim, e.c.VocabSize)
		return
	}
	st := e.clsStrips
	parts := max(1, min(e.threads, st.count()/minStripsPerThread))
	share := func(part int) { st.mul(logits, xs, m, part*st.count()/parts, (part+1)*st.count()/parts) }
	switch {
	case parts == 1:
		share(0)
	case e.s.crew != nil:
		parts = e.s.crew.size
		e.s.crew.run(share)
	default:
		var wg sync.WaitGroup
		for part := range parts {
			wg.Go(func() { share(part) })
		}
		wg.Wait()
	}
}

// minStripsPerThread: fewer strips than this per extra goroutine cost
// more to hand off than they save.
const minStripsPerThread = 64

// rope rotates q (all heads) and k (kv heads) in place as run.c does.
func (e *Executor) rope(q, k []float32, pos int) {
	hs := e.c.HeadSize()
	half := hs / 2
	cos, sin := e.cos[pos*half:(pos+1)*half], e.sin[pos*half:(pos+1)*half]
	for i := 0; i < len(q); i += 2 {
		j := (i % hs) / 2
		fcr, fci := cos[j], sin[j]
		v0, v1 := q[i], q[i+1]
		q[i], q[i+1] = v0*fcr-v1*fci, v0*fci+v1*fcr
		if i < len(k) {
			v0, v1 = k[i], k[i+1]
			k[i], k[i+1] = v0*fcr-v1*fci, v0*fci+v1*fcr
		}
	}
}

// attend writes the multi-head attention output for one token at pos,
// reading every earlier position's K and V from the paged cache one block
// at a time (positions in a block are KVDim floats apart). Without simd it
// runs run.c's loops (sums in its order). With simd it takes the AVX2
// kernels (attn_amd64.s): eight positions' scores at a time, a vectorized
// softmax, and the weighted sum of V rows eight dimensions at a time; att
// must then hold roundUp8(pos+1) floats, and every result still depends
// only on the query and the cached K/V, but the sums are not in run.c's
// order. The walk over heads and blocks is shared; simd picks the kernels
// per block (a branch the CPU predicts, against a kernel call).
func (e *Executor) attend(out, q, att []float32, blocks []int, l, pos int, simd bool) {
	c, bs := e.c, e.blockSize
	hs, kvd := c.HeadSize(), c.KVDim()
	group := c.NHeads / c.NKVHeads
	scale := float32(math.Sqrt(float64(hs)))
	n := pos + 1
	padded := n
	if simd {
		padded = roundUp8(n)
	}
	att = att[:padded]
	kOff, vOff := l*2*bs*kvd, (l*2+1)*bs*kvd
	for h := range c.NHeads {
		qh := q[h*hs : (h+1)*hs]
		head := (h / group) * hs
		for t0 := 0; t0 < n; t0 += bs {
			m := min(bs, n-t0)
			base := blocks[t0/bs]*e.blockFloats + kOff + head
			if simd {
				scores8(&att[t0], &qh[0], hs, &e.kv[base], kvd, roundUp8(m)/8, scale)
			} else {
				scores(att[t0:t0+m], qh, e.kv[base:base+(m-1)*kvd+hs], kvd, scale)
			}
		}
		if simd {
			for i := n; i < padded; i++ { // scores of rows past the end
				att[i] = float32(math.Inf(-1))
			}
			expf8(&att[0], padded, 1, -max8(&att[0], padded))
			div8(&att[0], padded, sum8(&att[0], padded))
		} else {
			e.softmax(att)
		}
		oh := out[h*hs : (h+1)*hs]
		clear(oh)
		for t0 := 0; t0 < n; t0 += bs {
			m := min(bs, n-t0)
			base := blocks[t0/bs]*e.blockFloats + vOff + head
			if simd {
				weighted8(&oh[0], &att[t0], m, &e.kv[base], kvd, hs)
			} else {
				weighted(oh, att[t0:t0+m], e.kv[base:base+(m-1)*kvd+hs], kvd)
			}
		}
	}
}

func roundUp8(n int) int { return (n + 7) &^ 7 }

// scores sets att[s] = (q . k_s) / scale for the rows k_s = kb[s*stride:],
// each dot product summed in index order like run.c. Four positions are
// summed side by side: four independent chains instead of one, so the
// adds overlap, with each sum still in the same order (same bits).
func scores(att, q, kb []float32, stride int, scale float32) {
	s := 0
	if len(q) == 8 {
		q := q[:8:8]
		for ; s < len(att); s++ {
			k := kb[s*stride : s*stride+8 : s*stride+8]
			score := q[0] * k[0]
			score += q[1] * k[1]
			score += q[2] * k[2]
			score += q[3] * k[3]
			score += q[4] * k[4]
			score += q[5] * k[5]
			score += q[6] * k[6]
			score += q[7] * k[7]
			att[s] = score / scale
		}
		return
	}
	hs := len(q)
	for ; s+4 <= len(att); s += 4 {
		k0 := kb[s*stride : s*stride+hs]
		k1 := kb[(s+1)*stride : (s+1)*stride+hs]
		k2 := kb[(s+2)*stride : (s+2)*stride+hs]
		k3 := kb[(s+3)*stride : (s+3)*stride+hs]
		var a0, a1, a2, a3 float32
		for i, qv := range q {
			a0 += qv * k0[i]
			a1 += qv * k1[i]
			a2 += qv * k2[i]
			a3 += qv * k3[i]
		}
		att[s], att[s+1], att[s+2], att[s+3] = a0/scale, a1/scale, a2/scale, a3/scale
	}
	for ; s < len(att); s++ {
		k := kb[s*stride : s*stride+hs]
		var score float32
		for i, qv := range q {
			score += qv * k[i]
		}
		att[s] = score / scale
	}
}

// weighted adds sum_s att[s] * v_s to out, position by position. Each
// output stays in a register across positions, eight at a time, summed in
// position order (the bits of run.c's loop).
func weighted(out, att, vb []float32, stride int) {
	for i0 := 0; i0+8 <= len(out); i0 += 8 {
		o := out[i0 : i0+8 : i0+8]
		o0, o1, o2, o3, o4, o5, o6, o7 := o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7]
		for s, a := range att {
			v := vb[s*stride+i0 : s*stride+i0+8 : s*stride+i0+8]
			o0 += a * v[0]
			o1 += a * v[1]
			o2 += a * v[2]
			o3 += a * v[3]
			o4 += a * v[4]
			o5 += a * v[5]
			o6 += a * v[6]
			o7 += a * v[7]
		}
		o[0], o[1], o[2], o[3], o[4], o[5], o[6], o[7] = o0, o1, o2, o3, o4, o5, o6, o7
	}
	if rest := len(out) % 8; rest != 0 {
		i0 := len(out) - rest
		for s, a := range att {
			v := vb[s*stride+i0 : s*stride+len(out)]
			for i := range v {
				out[i0+i] += a * v[i]
			}
		}
	}
}

// minParallelMACs is a layer's multiply-adds (products and attention over
// all rows of the step) per extra thread. Below it a second thread gained
// nothing on the 2-vCPU VM this was measured on: stories260K decode at
// batch 4 and 16 (under 1M per layer) ran 1.1-3x faster on one thread
// than on two (each thread's work took ~1.6x longer while the other
// computed, and phases are microseconds long). A 256-token stories260K
// prefill (~16M per layer: 52k tok/s on one thread, 76k on two) and
// stories15M-sized batches still split.
const minParallelMACs = 4 << 20

// parallelRows splits the step's rows into contiguous ranges, one per
// crew member. Rows are independent, so the split never changes results.
func (e *Executor) parallelRows(f func(r0, r1 int, att []float32)) {
	s := &e.s
	if s.workers <= 1 {
		f(0, s.rows, s.atts[0])
		return
	}
	s.crew.run(func(w int) {
		f(w*s.rows/s.workers, (w+1)*s.rows/s.workers, s.atts[w])
	})
}

func rmsnorm(o, x, weight []float32) {
	var ss float32
	for _, v := range x {
		ss += v * v
	}
	ss /= float32(len(x))
	ss += 1e-5
	ss = 1 / float32(math.Sqrt(float64(ss)))
	for j := range o {
		o[j] = weight[j] * (ss * x[j])
	}
}

// softmax normalizes x in place as run.c does: subtract the max,
// exponentiate, divide by the sum (accumulated in index order).
func (e *Executor) softmax(x []float32) {
	maxv := x[0]
	for _, v := range x[1:] {
		if v > maxv {
			maxv = v
		}
	}
	for i := range x {
		x[i] -= maxv
	}
	e.exp(x)
	var sum float32
	for _, v := range x {
		sum += v
	}
	for i := range x {
		x[i] /= sum
	}
}

// swiglu computes hb = silu(hb) * hb2 with silu(v) = v / (1 + e^-v),
// using tmp (same length) for the exponentials.
func (e *Executor) swiglu(hb, hb2, tmp []float32) {
	if e.simdExp() {
		copy(tmp, hb)
		negExpSIMD(tmp)
	} else {
		for i, v := range hb {
			tmp[i] = -v
		}
		e.exp(tmp)
	}
	for i, v := range hb {
		v *= 1 / (1 + tmp[i])
		hb[i] = v * hb2[i]
	}
}

// negExpSIMD sets x[i] = e^-x[i] with expf8, the tail (under 8) through a
// copy so that every element gets the same arithmetic.
func negExpSIMD(x []float32) {
	n := len(x) &^ 7
	if n > 0 {
		expf8(&x[0], n, -1, 0)
	}
	if n < len(x) {
		var t [8]float32
		copy(t[:], x[n:])
		expf8(&t[0], 8, -1, 0)
		copy(x[n:], t[:])
	}
}

func addInto(x, y []float32) {
	for i := range x {
		x[i] += y[i]
	}
}
