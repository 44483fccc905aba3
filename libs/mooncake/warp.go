package mooncake

import (
	"math"
	"slices"
	"sort"
	"time"
)

// Never is the replay offset of an arrival a rate profile never reaches:
// one whose trace time lies beyond the point where the multiplier drops to
// 0 for good.
const Never = time.Duration(math.MaxInt64)

// Warper maps trace time to replay time under a RateProfile so that the
// arrival rate is multiplied by m(t): dτ/dt = m(t), so trace time
// τ(t) = ∫₀ᵗ m(s) ds and an arrival at trace time τ is replayed at the
// first t with τ(t) ≥ τ. An interval where m is 0 takes no trace time, so
// nothing arrives in it.
//
// The integral is computed piecewise between the profile's breakpoints: in
// closed form where m is constant, exactly (8-point Gauss–Legendre on a
// polynomial of degree ≤ 8) where piecewise factors ramp, and for
// sinusoids on cells of a quarter period per sinusoid, within about 1e-12
// relative; the product of sinusoids repeats with their common period, so
// whole periods are multiplied rather than summed. The inverse is closed
// form where m is constant (exactly the identity for the constant 1) and
// otherwise bisected to 1e-9 ms or float64 resolution. It is monotone
// non-decreasing by construction, rounding included.
//
// A Warper is immutable and safe for concurrent use.
type Warper struct {
	p       RateProfile
	regions []region
	sins    []*factor
	// Πsin over one window [0, win): cumulative integral at the end of
	// each cell of width winH.
	win, winH float64
	winCum    []float64
}

type regionKind uint8

const (
	// regionFlat: m is the constant c.
	regionFlat regionKind = iota
	// regionRamp: m is a polynomial (piecewise factors ramp), no sinusoid.
	regionRamp
	// regionPeriodic: m is c times the product of the sinusoids.
	regionPeriodic
	// regionRampSin: ramps times sinusoids, integrated on n cells.
	regionRampSin
)

// region is [start, end) ms between consecutive breakpoints of the
// profile; the last one has end +Inf and a constant c times sinusoids.
type region struct {
	start, end float64
	kind       regionKind
	c          float64
	n          int
	// tau0 and tau1 are τ(start) and τ(end); cum (regionRampSin) is τ at
	// each cell's end minus tau0.
	tau0, tau1 float64
	cum        []float64
}

type profileLayout struct {
	regions  []region
	winCells int
	// cells counts the cells a Warper tabulates, as a float so a
	// pathological profile cannot overflow it.
	cells float64
}

// breakpoints are 0 and the times, in ms, where a step or piecewise factor
// changes, sorted and distinct; nsin and shortest count the sinusoids and
// give their shortest period.
func (p RateProfile) breakpoints() (breaks []float64, nsin int, shortest time.Duration) {
	breaks = []float64{0}
	for i := range p.factors {
		f := &p.factors[i]
		switch {
		case f.kind == kindStep:
			breaks = append(breaks, durMs(f.at))
		case f.kind == kindPiecewise:
			for _, pt := range f.points {
				breaks = append(breaks, durMs(pt.at))
			}
		case f.isSinusoid():
			nsin++
			if shortest == 0 || f.period < shortest {
				shortest = f.period
			}
		}
	}
	slices.Sort(breaks)
	return slices.Compact(breaks), nsin, shortest
}

// layout splits the profile at its breakpoints and classifies the regions.
func (p RateProfile) layout() profileLayout {
	breaks, nsin, shortest := p.breakpoints()
	var l profileLayout
	var h float64
	if nsin > 0 {
		l.winCells = int(p.window/shortest) * cellsPerShortest(nsin)
		l.cells = float64(l.winCells)
		h = durMs(shortest) / float64(cellsPerShortest(nsin))
	}
	for i, start := range breaks {
		r := region{start: start, end: math.Inf(1), c: 1}
		if i+1 < len(breaks) {
			r.end = breaks[i+1]
		}
		ramp := false
		for j := range p.factors {
			f := &p.factors[j]
			if f.isSinusoid() {
				continue
			}
			r.c *= f.value(start)
			ramp = ramp || (f.kind == kindPiecewise && f.value(start) != f.value(r.end))
		}
		switch {
		case ramp && nsin > 0:
			r.kind = regionRampSin
			n := math.Ceil((r.end - r.start) / h)
			l.cells += n
			r.n = int(min(n, maxCells+1))
		case ramp:
			r.kind = regionRamp
		case nsin > 0:
			r.kind = regionPeriodic
		default:
			r.kind = regionFlat
		}
		l.regions = append(l.regions, r)
	}
	return l
}

// NewWarper prepares the time mapping of p. Its cost is proportional to
// the profile's integration cells, which ParseRateProfile bounds.
func NewWarper(p RateProfile) *Warper {
	l := p.layout()
	w := &Warper{p: p, regions: l.regions}
	for i := range p.factors {
		if p.factors[i].isSinusoid() {
			w.sins = append(w.sins, &p.factors[i])
		}
	}
	if len(w.sins) > 0 {
		w.win = durMs(p.window)
		w.winH = w.win / float64(l.winCells)
		w.winCum = make([]float64, l.winCells)
		sum := 0.0
		for j := range w.winCum {
			sum += gauss(w.sinProduct, float64(j)*w.winH, w.winCellEnd(j))
			w.winCum[j] = sum
		}
	}
	tau := 0.0
	for i := range w.regions {
		r := &w.regions[i]
		r.tau0 = tau
		r.tau1 = tau + w.regionTotal(r)
		tau = r.tau1
	}
	return w
}

// Profile returns the profile w maps.
func (w *Warper) Profile() RateProfile { return w.p }

func (w *Warper) regionTotal(r *region) float64 {
	switch r.kind {
	case regionRamp:
		return gauss(w.p.Multiplier, r.start, r.end)
	case regionRampSin:
		r.cum = make([]float64, r.n)
		sum := 0.0
		for j := range r.cum {
			sum += gauss(w.p.Multiplier, r.cellStart(j), r.cellStart(j+1))
			r.cum[j] = sum
		}
		return sum
	case regionPeriodic:
		if math.IsInf(r.end, 1) {
			return infIfPositive(r.c * w.winCum[len(w.winCum)-1])
		}
		return r.c * (w.sinIntegral(r.end) - w.sinIntegral(r.start))
	default:
		if math.IsInf(r.end, 1) {
			return infIfPositive(r.c)
		}
		return r.c * (r.end - r.start)
	}
}

func infIfPositive(v float64) float64 {
	if v > 0 {
		return math.Inf(1)
	}
	return 0
}

// cellStart is the start of cell j of a regionRampSin; cell n's start is
// the region's end.
func (r *region) cellStart(j int) float64 {
	if j >= r.n {
		return r.end
	}
	return r.start + float64(j)*(r.end-r.start)/float64(r.n)
}

func (w *Warper) winCellEnd(j int) float64 {
	if j+1 >= len(w.winCum) {
		return w.win
	}
	return float64(j+1) * w.winH
}

func (w *Warper) sinProduct(t float64) float64 {
	m := 1.0
	for _, f := range w.sins {
		m *= f.sinValue(t)
	}
	return m
}

// sinIntegral is ∫₀ᵗ of the product of the sinusoids, t ≥ 0.
func (w *Warper) sinIntegral(t float64) float64 {
	k := math.Floor(t / w.win)
	x := min(max(t-k*w.win, 0), w.win)
	j := min(int(x/w.winH), len(w.winCum)-1)
	g := k * w.winCum[len(w.winCum)-1]
	if j > 0 {
		g += w.winCum[j-1]
	}
	return g + gauss(w.sinProduct, float64(j)*w.winH, x)
}

// sinInverse is the first t with sinIntegral(t) ≥ g, g > 0.
func (w *Warper) sinInverse(g float64) float64 {
	period := w.winCum[len(w.winCum)-1]
	k := math.Floor(g / period)
	rem := min(max(g-k*period, 0), period)
	j := min(sort.SearchFloat64s(w.winCum, rem), len(w.winCum)-1)
	prev := 0.0
	if j > 0 {
		prev = w.winCum[j-1]
	}
	lo := float64(j) * w.winH
	x := bisect(lo, w.winCellEnd(j), func(x float64) bool { return prev+gauss(w.sinProduct, lo, x) >= rem })
	// Capped at the next window's start, so rounding in k·win never puts a
	// later trace time before an earlier one.
	return min(k*w.win+x, (k+1)*w.win)
}

// TraceTime is τ(t): the trace time replayed by t ms into the replay.
// Times at or before the start map to themselves.
func (w *Warper) TraceTime(replayMs float64) float64 {
	if w.p.IsIdentity() || !(replayMs > 0) {
		return replayMs
	}
	i := sort.Search(len(w.regions), func(i int) bool { return w.regions[i].start > replayMs }) - 1
	r := &w.regions[i]
	t := replayMs
	switch r.kind {
	case regionRamp:
		return r.tau0 + gauss(w.p.Multiplier, r.start, t)
	case regionRampSin:
		j := min(int((t-r.start)/(r.end-r.start)*float64(r.n)), r.n-1)
		prev := 0.0
		if j > 0 {
			prev = r.cum[j-1]
		}
		return r.tau0 + prev + gauss(w.p.Multiplier, r.cellStart(j), t)
	case regionPeriodic:
		return r.tau0 + r.c*(w.sinIntegral(t)-w.sinIntegral(r.start))
	default:
		return r.tau0 + r.c*(t-r.start)
	}
}

// ReplayTime is τ⁻¹: when, in ms from the start of the replay, an arrival
// at traceMs of (speed-scaled) trace time is sent. It is +Inf when the
// profile never reaches traceMs. Times at or before the start map to
// themselves.
func (w *Warper) ReplayTime(traceMs float64) float64 {
	if w.p.IsIdentity() || !(traceMs > 0) {
		return traceMs
	}
	i := sort.Search(len(w.regions), func(i int) bool { return w.regions[i].tau1 >= traceMs })
	if i == len(w.regions) {
		return math.Inf(1)
	}
	// tau0 < traceMs ≤ tau1, so the region's multiplier is not all 0.
	r := &w.regions[i]
	rem := traceMs - r.tau0
	var t float64
	switch r.kind {
	case regionRamp:
		t = bisect(r.start, r.end, func(x float64) bool { return gauss(w.p.Multiplier, r.start, x) >= rem })
	case regionRampSin:
		j := min(sort.SearchFloat64s(r.cum, rem), r.n-1)
		prev := 0.0
		if j > 0 {
			prev = r.cum[j-1]
		}
		lo := r.cellStart(j)
		t = bisect(lo, r.cellStart(j+1), func(x float64) bool { return prev+gauss(w.p.Multiplier, lo, x) >= rem })
	case regionPeriodic:
		t = w.sinInverse(w.sinIntegral(r.start) + rem/r.c)
	default:
		t = r.start + rem/r.c
	}
	return min(max(t, r.start), r.end)
}

// Offset is ReplayTime on durations, rounded to the nanosecond: the replay
// offset of an arrival d into the (speed-scaled) trace, Never when the
// profile never reaches it.
func (w *Warper) Offset(d time.Duration) time.Duration {
	if w.p.IsIdentity() || d <= 0 {
		return d
	}
	ns := math.Round(w.ReplayTime(durMs(d)) * float64(time.Millisecond))
	if ns >= math.MaxInt64 {
		return Never
	}
	return time.Duration(ns)
}

// WarpRecords rewrites each record's TimestampMs, read as trace time from
// 0, to its replay time, drops the records the profile never reaches, and
// returns the rest in their order (in recs' backing array). Replay.At
// warps offsets from the first record after Speed instead.
func (w *Warper) WarpRecords(recs []Record) []Record {
	out := recs[:0]
	for _, rec := range recs {
		t := w.ReplayTime(rec.TimestampMs)
		if math.IsInf(t, 1) {
			continue
		}
		rec.TimestampMs = t
		out = append(out, rec)
	}
	return out
}

// Warp is NewWarper(p).ReplayTime(traceMs); build a Warper to map many
// times.
func Warp(p RateProfile, traceMs float64) float64 { return NewWarper(p).ReplayTime(traceMs) }
