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

// prefill is the prefill pool's need. Each replica is an M/M/1 queue with
// service time t_p (a lone prefill of the mean prompt, times the TTFT
// correction c), so the mean TTFT at utilisation ρ is c·t_p/(1−ρ). Meeting
// the target T needs ρ ≤ ρ_max = 1 − c·t_p/T, and so
// n = λ·t_p/ρ_max replicas, the load in replica-seconds per second spread
// thin enough. With c·t_p ≥ T no count meets T.
func (m model) prefill(l load, corr float64) need {
	tp := m.prefillSeconds(l.isl)
	if corr*tp >= m.ttft {
		return need{infeasible: true, why: fmt.Sprintf("TTFT target %v below a lone prefill's %v: no replica count meets it",
			seconds(m.ttft), seconds(corr*tp))}
	}
	rhoMax := 1 - corr*tp/m.ttft
	n := l.rate * tp / rhoMax
	return need{replicas: ceil(n), why: fmt.Sprintf("(profile: %v a prefill, ρ ≤ %.2f, correction %.2f)", seconds(tp), rhoMax, corr)}
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
// TTFT is c_p·t_p/(1−ρ_p) as in prefill, and decoding gets the rest of its
// time: the ITL stretches to c_d·ITL(b)/(1−ρ_p) at a batch of b = L/n,
// with L = λ·OSL·T_itl sequences at once (every token at the target: an
// upper bound). n is the smallest count meeting both targets with the
// batch in KV. Adding the two pools' separate needs would not be sound: a
// replica almost saturated by prefill has nearly no time left to decode.
func (m model) aggregated(l load, cTTFT, cITL float64) need {
	tp := m.prefillSeconds(l.isl)
	ctx := l.context()
	switch {
	case cTTFT*tp >= m.ttft:
		return need{infeasible: true, why: fmt.Sprintf("TTFT target %v below a lone prefill's %v: no replica count meets it",
			seconds(m.ttft), seconds(cTTFT*tp))}
	case m.prof.MaxBatchWithin(m.itl/cITL, ctx, 0, 0) == 0:
		return need{infeasible: true, why: m.decodeInfeasible(ctx, cITL)}
	}
	rhoMax := 1 - cTTFT*tp/m.ttft
	conc := l.rate * l.osl * m.itl
	kvMax := m.prof.MaxBatchWithin(math.Inf(1), ctx, 0, 0)
	ok := func(n int) bool {
		rho := l.rate * tp / float64(n)
		b := max(1, ceil(conc/float64(n)))
		return rho < rhoMax && b <= kvMax && cITL*m.prof.DecodeITL(b, ctx) <= m.itl*(1-rho)
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

// expectedTTFT is the mean TTFT the model expects from n replicas
// prefilling at load l, uncorrected; false when they would be saturated
// (the queue grows without bound, and no ratio to it is meaningful).
func (m model) expectedTTFT(l load, n int) (float64, bool) {
	tp := m.prefillSeconds(l.isl)
	if n <= 0 {
		return 0, false
	}
	rho := l.rate * tp / float64(n)
	if rho >= 1 {
		return 0, false
	}
	return tp / (1 - rho), true
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
