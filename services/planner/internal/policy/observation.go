package policy

import "math"

// Observation is what one interval showed, for one model.
type Observation struct {
	// Rate is the requests per second that arrived.
	Rate float64
	// MeanISL is the mean of the new (uncached) prompt tokens each request
	// prefilled, and MeanOSL of the tokens each generated; both over the
	// requests that finished. With Samples 0 they are ignored.
	MeanISL, MeanOSL float64
	// TTFTP90 and ITLP90 are the observed 90th percentiles, in seconds;
	// 0 means no samples.
	TTFTP90, ITLP90 float64
	// Samples is the number of requests that finished in the interval.
	Samples int
	// Replicas are the replicas serving now (started and healthy).
	Replicas Replicas
	// Prefill and Decode are the pools' queues. In aggregated mode only
	// Decode is read.
	Prefill, Decode Queue
}

// Replicas counts replicas per pool.
type Replicas struct{ Prefill, Decode int }

// Queue is one pool's backlog, summed or averaged over its replicas.
type Queue struct {
	// Waiting is the requests queued, not yet running.
	Waiting int
	// KVUsage is the mean fraction of KV cache blocks in use, 0..1.
	KVUsage float64
}

// kvFull is the KV usage from which a decode pool counts as backlogged
// for the reactive rule even with nothing waiting: new sequences are about
// to be refused or running ones preempted.
const kvFull = 0.95

// sanitized replaces what no interval can have shown (negative counts, NaN
// or infinite values) by zero, which the planner reads as "no data".
func (o Observation) sanitized() Observation {
	f := func(v float64) float64 {
		if v > 0 && !math.IsInf(v, 0) {
			return v
		}
		return 0
	}
	o.Rate, o.MeanISL, o.MeanOSL = f(o.Rate), f(o.MeanISL), f(o.MeanOSL)
	o.TTFTP90, o.ITLP90 = f(o.TTFTP90), f(o.ITLP90)
	o.Samples = max(o.Samples, 0)
	o.Replicas.Prefill, o.Replicas.Decode = max(o.Replicas.Prefill, 0), max(o.Replicas.Decode, 0)
	for _, q := range []*Queue{&o.Prefill, &o.Decode} {
		q.Waiting = max(q.Waiting, 0)
		q.KVUsage = min(f(q.KVUsage), 1)
	}
	return o
}
