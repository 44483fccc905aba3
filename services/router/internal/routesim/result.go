package routesim

import (
	"math"
	"slices"
	"time"

	"switchyard.dev/libs/kvtier"
)

// Outcome is what became of one request.
type Outcome struct {
	Worker int // index of the worker it was routed to
	// TTFT is arrival to first token; -1 if the worker refused the
	// request (a prompt longer than it can hold) or failed it.
	TTFT time.Duration
	// PromptTokens and CachedTokens are the prompt and the part of it the
	// worker found in its prefix cache at admission (0 if it failed).
	PromptTokens, CachedTokens int
	// Queue is arrival to the first step that computed any of the
	// prompt, as a live worker's ttft_queue metric counts it (a pulling
	// request's copy included); TTFT - Queue is its prefill. PulledBlocks
	// are the blocks it copied from a peer (prefix pull).
	Queue        time.Duration
	PulledBlocks int
	// Onboarded counts the blocks loaded from the worker's own lower
	// tiers, by tier.
	Onboarded [kvtier.Count]int
}

// Failed reports whether the request never got a first token.
func (o Outcome) Failed() bool { return o.TTFT < 0 }

// Result is a replay's outcome, request by request in arrival order.
type Result struct {
	Requests []Outcome
	// Failed counts requests that never got a first token: prompts a
	// worker refuses (as long as its context or KV pool) and sequences
	// that cannot fit even alone. Preemptions counts the sequences the
	// workers preempted for blocks.
	Failed, Preemptions int
	End                 time.Duration // when the last request finished
	// Pulls counts the requests that copied leading blocks from a peer
	// (prefix pull), PulledBlocks the blocks they copied.
	Pulls, PulledBlocks int
	// Onboarded counts the blocks loaded from lower tiers, by tier.
	Onboarded [kvtier.Count]int
}

// HitRatio is the fraction of prompt tokens served from a prefix cache,
// over the requests that did not fail.
func (r *Result) HitRatio() float64 {
	var prompt, cached int
	for _, o := range r.Requests {
		if !o.Failed() {
			prompt += o.PromptTokens
			cached += o.CachedTokens
		}
	}
	if prompt == 0 {
		return 0
	}
	return float64(cached) / float64(prompt)
}

// TTFTs returns the first-token times of the requests that did not fail,
// sorted.
func (r *Result) TTFTs() []time.Duration {
	out := make([]time.Duration, 0, len(r.Requests))
	for _, o := range r.Requests {
		if !o.Failed() {
			out = append(out, o.TTFT)
		}
	}
	slices.Sort(out)
	return out
}

// MeanTTFT is the mean first-token time of the requests that did not fail.
func (r *Result) MeanTTFT() time.Duration {
	return r.mean(func(o Outcome) time.Duration { return o.TTFT })
}

// MeanQueue is the mean Queue of the requests that did not fail.
func (r *Result) MeanQueue() time.Duration {
	return r.mean(func(o Outcome) time.Duration { return o.Queue })
}

// mean averages f over the requests that did not fail.
func (r *Result) mean(f func(Outcome) time.Duration) time.Duration {
	var sum time.Duration
	n := 0
	for _, o := range r.Requests {
		if !o.Failed() {
			sum += f(o)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}

// Quantile returns the nearest-rank q-quantile (q in [0, 1]) of sorted ts:
// the smallest value with at least a fraction q of ts at or below it.
func Quantile(ts []time.Duration, q float64) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(ts)))) - 1
	return ts[min(max(i, 0), len(ts)-1)]
}
