package policy

// share is one pool's claim on the budget.
type share struct{ want, min int }

// splitBudget fits two pools' wanted counts into budget. Each keeps its
// Min (Validate guarantees the budget covers both); what the budget has
// left is shared in proportion to what each wants above its Min, rounded
// down, and a unit left over by the rounding goes to the pool with the
// larger remainder, decode on a tie: a decode shortfall slows every
// running stream, a prefill one only the requests still to start. It
// returns the counts unchanged when they fit.
func splitBudget(budget int, prefill, decode share) (p, d int) {
	if prefill.want+decode.want <= budget {
		return prefill.want, decode.want
	}
	left := budget - prefill.min - decode.min
	ep, ed := max(prefill.want-prefill.min, 0), max(decode.want-decode.min, 0)
	// Integer arithmetic: the remainders compare exactly.
	total := ep + ed
	p, d = left*ep/total, left*ed/total
	rp, rd := left*ep%total, left*ed%total
	if p+d < left {
		if rp > rd {
			p++
		} else {
			d++
		}
	}
	return prefill.min + p, decode.min + d
}
