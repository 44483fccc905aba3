package profile

import (
	"math"
	"slices"
)

// DecodeITL is the inter-token latency of one replica decoding batch
// sequences of mean context length context: bilinear in the measured
// points (see the package doc for how it extrapolates). It is 0 for
// batch ≤ 0 or a profile without decode points.
func (p *Profile) DecodeITL(batch, context int) float64 {
	if batch <= 0 || len(p.Decode) == 0 {
		return 0
	}
	rs := rows(p.Decode)
	b, c := float64(batch), float64(context)
	n := len(rs)
	switch {
	case n == 1 || c <= rs[0].context():
		return rowAt(rs, 0, b)
	case c >= rs[n-1].context():
		// Linear in context through the two longest rows, never falling:
		// attention reads every context token, so a longer context is no
		// faster, whatever the noise between two rows says.
		v0, v1 := rowAt(rs, n-2, b), rowAt(rs, n-1, b)
		k := (c - rs[n-1].context()) / (rs[n-1].context() - rs[n-2].context())
		return v1 + max(0, v1-v0)*k
	}
	i := 0
	for c > rs[i+1].context() {
		i++
	}
	return lerp(rs[i].context(), rowAt(rs, i, b), rs[i+1].context(), rowAt(rs, i+1, b), c)
}

// MaxBatchWithin is the largest batch B such that every batch from 1 to B
// decodes at context tokens with an ITL of at most itlTarget seconds, and B
// sequences' KV blocks (each holds ceil(context/blockSize) whole blocks)
// fit in kvBlocks. kvBlocks or blockSize ≤ 0 take the profile's. It is 0
// when batch 1 already misses the target or one sequence does not fit.
//
// Requiring every smaller batch to meet the target too (the first crossing,
// not the last) is what a planner needs: a replica's batch passes through
// the smaller sizes as load rises, and a noisy dip in the measurements must
// not make a large batch look feasible.
func (p *Profile) MaxBatchWithin(itlTarget float64, context, kvBlocks, blockSize int) int {
	if kvBlocks <= 0 {
		kvBlocks = p.KVBlocks
	}
	if blockSize <= 0 {
		blockSize = p.BlockSize
	}
	if blockSize <= 0 || len(p.Decode) == 0 {
		return 0
	}
	perSeq := 1
	if context > 0 {
		perSeq = (context-1)/blockSize + 1 // ceil without overflow
	}
	kvMax := kvBlocks / perSeq
	ok := func(b int) bool { return p.DecodeITL(b, context) <= itlTarget }
	if kvMax < 1 || !ok(1) {
		return 0
	}
	// Between two consecutive measured batch sizes the ITL is linear, or
	// the maximum of two linear functions past the longest context: convex
	// either way, so with both ends within the target the whole segment is,
	// and with only the left end the feasible batches are a prefix of it.
	lo := 1
	for _, bp := range batchSizes(p.Decode) {
		if bp <= lo {
			continue
		}
		if bp >= kvMax {
			break
		}
		if !ok(bp) {
			return lastOK(ok, lo, bp)
		}
		lo = bp
	}
	if ok(kvMax) {
		return kvMax
	}
	return lastOK(ok, lo, kvMax)
}

// lastOK is the largest b in [lo, hi) with ok(b), given ok(lo), !ok(hi) and
// that the b with ok(b) in [lo, hi] are a prefix.
func lastOK(ok func(int) bool, lo, hi int) int {
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}

// row is a run of decode points with one context length, sorted by batch.
type row []DecodePoint

func (r row) context() float64 { return float64(r[0].ContextTokens) }

// at is the row's ITL at batch b; the row has two points at least. Flat
// below its smallest batch (a replica is no faster with fewer sequences
// than it was measured with, as far as we know); past its largest, linear
// through the last two points but never below the last (a dip between
// them is noise, not a sign that more sequences decode faster).
func (r row) at(b float64) float64 {
	if b <= float64(r[0].Batch) {
		return r[0].ITLSeconds
	}
	i := 0
	for i < len(r)-2 && b > float64(r[i+1].Batch) {
		i++
	}
	x, y := r[i], r[i+1]
	v := lerp(float64(x.Batch), x.ITLSeconds, float64(y.Batch), y.ITLSeconds, b)
	if b > float64(y.Batch) {
		return max(v, y.ITLSeconds)
	}
	return v
}

// rowAt is row i's ITL at batch b. A row measured at one batch size takes
// the shape in batch of the nearest row measured at two (the longer one on
// a tie), scaled to pass through its one point; Validate guarantees such a
// row exists.
func rowAt(rs []row, i int, b float64) float64 {
	r := rs[i]
	if len(r) >= 2 {
		return r.at(b)
	}
	shape := -1
	for j, s := range rs {
		if len(s) < 2 {
			continue
		}
		if shape < 0 || math.Abs(s.context()-r.context()) <= math.Abs(rs[shape].context()-r.context()) {
			shape = j
		}
	}
	if shape < 0 {
		return r[0].ITLSeconds
	}
	s := rs[shape]
	return r[0].ITLSeconds * s.at(b) / s.at(float64(r[0].Batch))
}

// rows splits points sorted by context into runs of one context each.
func rows(pts []DecodePoint) []row {
	var rs []row
	start := 0
	for i := 1; i <= len(pts); i++ {
		if i == len(pts) || pts[i].ContextTokens != pts[start].ContextTokens {
			rs = append(rs, pts[start:i])
			start = i
		}
	}
	return rs
}

// batchSizes are the distinct measured batch sizes, ascending: the points
// where DecodeITL may bend as batch grows.
func batchSizes(pts []DecodePoint) []int {
	bs := make([]int, 0, len(pts))
	for _, pt := range pts {
		bs = append(bs, pt.Batch)
	}
	slices.Sort(bs)
	return slices.Compact(bs)
}
