package fleet

import (
	"math"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The frontend metrics the console reads, by name. Every read of the
// frontend's registry goes through these, so a rename is one edit here
// (services/frontend/internal/metrics defines them).
const (
	metricTTFT         = "switchyard_frontend_time_to_first_token_seconds"
	metricITL          = "switchyard_frontend_inter_token_latency_seconds"
	metricPromptTokens = "switchyard_frontend_prompt_tokens_total"
	metricCachedTokens = "switchyard_frontend_cached_prompt_tokens_total"
)

// cumulative is one read of the registry: each histogram summed over its
// labels, and the token counters.
type cumulative struct {
	ttft, itl      histogram
	prompt, cached float64
}

// histogram is cumulative bucket counts at upper bounds (the +Inf bucket
// last).
type histogram struct {
	bounds []float64
	counts []uint64
}

// read gathers g once; metrics it lacks read as zero.
func read(g prometheus.Gatherer) (cumulative, error) {
	var c cumulative
	mfs, err := g.Gather()
	if err != nil {
		return c, err
	}
	for _, mf := range mfs {
		switch mf.GetName() {
		case metricTTFT:
			c.ttft = sumHistogram(mf.GetMetric())
		case metricITL:
			c.itl = sumHistogram(mf.GetMetric())
		case metricPromptTokens:
			c.prompt = sumCounter(mf.GetMetric())
		case metricCachedTokens:
			c.cached = sumCounter(mf.GetMetric())
		}
	}
	return c, nil
}

func sumCounter(ms []*dto.Metric) float64 {
	var s float64
	for _, m := range ms {
		s += m.GetCounter().GetValue()
	}
	return s
}

// sumHistogram adds the series of one histogram family; they share
// buckets, being one HistogramVec.
func sumHistogram(ms []*dto.Metric) histogram {
	var h histogram
	for _, m := range ms {
		hm := m.GetHistogram()
		if h.bounds == nil {
			for _, b := range hm.GetBucket() {
				h.bounds = append(h.bounds, b.GetUpperBound())
			}
			h.bounds = append(h.bounds, math.Inf(1))
			h.counts = make([]uint64, len(h.bounds))
		}
		bs := hm.GetBucket()
		if len(bs)+1 != len(h.bounds) {
			continue // not the same buckets: cannot be added
		}
		for i, b := range bs {
			h.counts[i] += b.GetCumulativeCount()
		}
		h.counts[len(bs)] += hm.GetSampleCount()
	}
	return h
}

// since is h minus an earlier read of the same histogram: the samples
// in between. A reset (fewer samples than before) counts from zero.
func (h histogram) since(prev histogram) histogram {
	if !slices.Equal(h.bounds, prev.bounds) {
		return h
	}
	d := histogram{bounds: h.bounds, counts: make([]uint64, len(h.counts))}
	for i := range h.counts {
		if h.counts[i] < prev.counts[i] {
			return h
		}
		d.counts[i] = h.counts[i] - prev.counts[i]
	}
	return d
}

func (h histogram) total() uint64 {
	if len(h.counts) == 0 {
		return 0
	}
	return h.counts[len(h.counts)-1]
}

// quantile estimates the q-quantile as Prometheus' histogram_quantile
// does: linear within the bucket that holds it, the last finite bound for
// the +Inf bucket. It is 0 without samples.
func (h histogram) quantile(q float64) float64 {
	n := h.total()
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	lower, below := 0.0, uint64(0)
	for i, c := range h.counts {
		if float64(c) >= rank {
			upper := h.bounds[i]
			if math.IsInf(upper, 1) {
				return lower
			}
			in := c - below
			if in == 0 {
				return upper
			}
			return lower + (upper-lower)*(rank-float64(below))/float64(in)
		}
		lower, below = h.bounds[i], c
	}
	return lower
}

// point is the interval from prev to now as a Point.
func point(unixMilli int64, now, prev cumulative) Point {
	ttft, itl := now.ttft.since(prev.ttft), now.itl.since(prev.itl)
	p := Point{
		Time:    unixMilli,
		TTFTP50: ttft.quantile(0.5), TTFTP99: ttft.quantile(0.99),
		ITLP50: itl.quantile(0.5), ITLP99: itl.quantile(0.99),
		Requests: ttft.total(),
	}
	if prompt := now.prompt - prev.prompt; prompt > 0 {
		r := min(max((now.cached-prev.cached)/prompt, 0), 1)
		p.HitRatio = &r
	}
	return p
}
