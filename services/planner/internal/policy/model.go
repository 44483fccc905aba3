package policy

import (
	"fmt"
	"math"
	"time"

	"switchyard.dev/services/planner/internal/profile"
)

// model is the throughput model: a profile and the latency targets.
type model struct {
	prof      *profile.Profile
	ttft, itl float64 // targets, seconds
}

// load is what the model plans for: a request rate and mean lengths.
type load struct {
	rate, isl, osl float64
}

func (l load) scaled(f float64) load { l.rate *= f; return l }

// context is the mean context of a decoding sequence: its prompt and half
// its output. With prefix caching MeanISL counts new tokens only, so this
// understates the context of requests that hit the cache.
func (l load) context() int { return max(1, int(math.Round(l.isl+l.osl/2))) }

// need is the model's replica count for one pool.
type need struct {
	replicas   int
	infeasible bool
	// why explains the count for the Reason, after the rate.
	why string
}

// maxNeed bounds a count so that it stays an int; any pool's Max is far
// below it.
const maxNeed = 1 << 20

// prefillSeconds is a lone prefill of the mean prompt; a prompt of under
// one new token (all cached) still computes one.
func (m model) prefillSeconds(isl float64) float64 {
	return m.prof.PrefillSeconds(max(1, int(math.Round(isl))))
}

// prefill is the prefill pool's need: the fewest replicas whose p90 TTFT
// (ttftP90), times the TTFT correction c, meets the target T (ttftOK).
// With t_p ≥ T (a lone prefill of the mean prompt already misses it) no
// count does.
func (m model) prefill(l load, corr float64) need {
	tp := m.prefillSeconds(l.isl)
	if tp >= m.ttft {
		return need{infeasible: true, why: fmt.Sprintf("TTFT target %v below a lone prefill's %v: no replica count meets it",
			seconds(m.ttft), seconds(tp))}
	}
	n := 0
	if l.rate > 0 {
		n = smallest(func(n int) bool { return m.ttftOK(l.rate, tp, n, corr) })
	}
	return need{replicas: n, why: fmt.Sprintf("(profile: %v a prefill, correction %.2f)", seconds(tp), corr)}
}

// ttftOK reports whether n replicas meet the TTFT target, their modelled
// p90 times the correction c. Infeasibility is the profile's word alone (a
// lone prefill of the mean prompt over the target): a correction that puts
// even a lone prefill over it says that the observed tail (the longest
// prompts) misses the target at any count, which more replicas cannot
// mend; the pool is then planned for no wait at the p90 (n past which
// replicas only idle), not for its cap.
func (m model) ttftOK(rate, tp float64, n int, c float64) bool {
	p90, ok := ttftP90(rate, tp, n)
	switch {
	case !ok:
		return false
	case c*tp >= m.ttft:
		return p90 <= tp
	}
	return c*p90 <= m.ttft
}

// ttftP90 is the p90 time to first token of n replicas prefilling
// requests arriving at rate λ that take t_p each. The router sends each
// request to the least-loaded replica, so together they queue as one
// M/M/n system rather than n separate ones: a request waits with the
// Erlang C probability C(n, a), a = λ·t_p, and then for an exponential
// time of mean t_p/(n−a), so P(wait > t) = C·e^{−(n−a)t/t_p} and the
// p90 is t_p plus ln(10·C)·t_p/(n−a) when C > 0.1 (else no wait at the
// p90). Planning n separate M/M/1 queues instead asks for several times
// the replicas a pooled fleet needs at the same p90. False when the n
// replicas would be saturated.
func ttftP90(rate, tp float64, n int) (float64, bool) {
	a := rate * tp
	if n <= 0 || a >= float64(n) {
		return 0, false
	}
	c := erlangC(n, a)
	if c <= 0.1 {
		return tp, true
	}
	return tp + math.Log(10*c)*tp/(float64(n)-a), true
}

// erlangC is the probability that a request waits in an M/M/n queue of
// offered load a < n, through the Erlang B recursion (stable for any n).
func erlangC(n int, a float64) float64 {
	b := 1.0
	for k := 1; k <= n; k++ {
		b = a * b / (float64(k) + a*b)
	}
	return float64(n) * b / (float64(n) - a*(1-b))
}

// decode is the decode pool's need. B* is the largest batch whose
// corrected ITL meets the target and whose KV fits; by Little's law the
// sequences decoding at once are λ·OSL·ITL (each stays OSL tokens of one
// ITL each), with ITL the corrected ITL at B*; n = that / B*. At fewer
// than B* sequences a replica decodes faster still, so the residence time
// assumed is an upper bound.
func (m model) decode(l load, corr float64) need {
	ctx := l.context()
	bStar := m.prof.MaxBatchWithin(m.itl/corr, ctx, 0, 0)
	if bStar == 0 {
		return need{infeasible: true, why: m.decodeInfeasible(ctx, corr)}
	}
	itl := corr * m.prof.DecodeITL(bStar, ctx)
	n := l.rate * l.osl * itl / float64(bStar)
	return need{replicas: ceil(n), why: fmt.Sprintf("(profile: batch ≤ %d at %d context, correction %.2f)", bStar, ctx, corr)}
}

func (m model) decodeInfeasible(ctx int, corr float64) string {
	if m.prof.MaxBatchWithin(math.Inf(1), ctx, 0, 0) == 0 {
		return fmt.Sprintf("a %d-token context does not fit one replica's KV cache (%d blocks of %d): no replica count meets it",
			ctx, m.prof.KVBlocks, m.prof.BlockSize)
	}
	return fmt.Sprintf("ITL target %v below batch-1 ITL %v: no replica count meets it",
		seconds(m.itl), seconds(corr*m.prof.DecodeITL(1, ctx)))
}

// aggregated is the need of one pool that prefills and decodes. A replica
// spends the fraction ρ_p = λ·t_p/n of its time prefilling (prefills run
// first, as engines schedule waiting requests before decode steps), so its
// p90 TTFT is c_p·ttftP90 as in prefill, and decoding gets the rest of
// its time: the ITL stretches to c_d·ITL(b)/(1−ρ_p) at a batch of b = L/n,
// with L = λ·OSL·T_itl sequences at once (every token at the target: an
// upper bound). n is the smallest count meeting both targets with the
// batch in KV. Adding the two pools' separate needs would not be sound: a
// replica almost saturated by prefill has nearly no time left to decode.
func (m model) aggregated(l load, cTTFT, cITL float64) need {
	tp := m.prefillSeconds(l.isl)
	ctx := l.context()
	switch {
	case tp >= m.ttft:
		return need{infeasible: true, why: fmt.Sprintf("TTFT target %v below a lone prefill's %v: no replica count meets it",
			seconds(m.ttft), seconds(tp))}
	case m.prof.MaxBatchWithin(m.itl/cITL, ctx, 0, 0) == 0:
		return need{infeasible: true, why: m.decodeInfeasible(ctx, cITL)}
	}
	conc := l.rate * l.osl * m.itl
	kvMax := m.prof.MaxBatchWithin(math.Inf(1), ctx, 0, 0)
	ok := func(n int) bool {
		rho := l.rate * tp / float64(n)
		b := max(1, ceil(conc/float64(n)))
		return m.ttftOK(l.rate, tp, n, cTTFT) && b <= kvMax && cITL*m.prof.DecodeITL(b, ctx) <= m.itl*(1-rho)
	}
	n := 0
	if l.rate > 0 {
		n = smallest(ok)
	}
	return need{replicas: n, why: fmt.Sprintf("(profile: %v a prefill, corrections TTFT %.2f, ITL %.2f)", seconds(tp), cTTFT, cITL)}
}

// smallest is the smallest n in [1, maxNeed] with ok(n), for ok false up
// to some n and true from there; maxNeed if none.
func smallest(ok func(int) bool) int {
	hi := 1
	for !ok(hi) {
		if hi >= maxNeed {
			return maxNeed
		}
		hi = min(2*hi, maxNeed)
	}
	lo := hi / 2 // !ok(lo) unless lo is 0
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// expectedTTFT is the p90 TTFT the model expects from n replicas
// prefilling at load l, uncorrected (ttftP90); false when they would be
// saturated (the queue grows without bound, and no ratio to it is
// meaningful).
func (m model) expectedTTFT(l load, n int) (float64, bool) {
	return ttftP90(l.rate, m.prefillSeconds(l.isl), n)
}

// expectedITL is the ITL the model expects from n replicas decoding at
// load l while spending the fraction rhoP of their time prefilling,
// uncorrected: the batch b and the ITL at b solve b = λ·OSL·ITL/n, found
// by iterating from batch 1. False when the batch would not fit the KV
// cache or a replica prefills all the time.
func (m model) expectedITL(l load, n int, rhoP float64) (float64, bool) {
	if n <= 0 || rhoP >= 1 {
		return 0, false
	}
	ctx := l.context()
	kvMax := m.prof.MaxBatchWithin(math.Inf(1), ctx, 0, 0)
	itl := m.prof.DecodeITL(1, ctx) / (1 - rhoP)
	for range 64 {
		b := l.rate * l.osl * itl / float64(n)
		if b > float64(kvMax) {
			return 0, false
		}
		next := m.prof.DecodeITL(max(1, ceil(b)), ctx) / (1 - rhoP)
		if next == itl {
			break
		}
		itl = next
	}
	return itl, true
}

// ceil rounds a count up, forgiving float noise (5.0000000001 is 5), and
// bounds it by maxNeed.
func ceil(x float64) int {
	if !(x > 0) {
		return 0
	}
	return int(min(math.Ceil(x-1e-9), maxNeed))
}

// seconds is s seconds as a Duration rounded to three or four significant
// digits, for reasons.
func seconds(s float64) time.Duration {
	d := time.Duration(s * float64(time.Second))
	for _, unit := range []time.Duration{time.Second, time.Millisecond, time.Microsecond} {
		if d >= unit {
			return d.Round(unit / 100)
		}
	}
	return d
}
