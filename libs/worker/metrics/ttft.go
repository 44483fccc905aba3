package metrics

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"switchyard.dev/libs/worker/disagg"
)

// TTFT holds the time-to-first-token histograms, one per phase, with the
// attribute "path". Unlike the engine gauges these are recorded on the
// request path, once per request: a histogram cannot be derived from
// snapshots.
type TTFT struct {
	queue, prefill, transfer, firstDecode metric.Float64Histogram
	requests                              metric.Int64Counter
	model                                 attribute.KeyValue

	mu     sync.Mutex
	totals PhaseTotals
}

// PhaseTotals are the phases summed over every request observed: what
// GetLoad reports, so a poller derives each phase's mean over an
// interval without scraping the histograms.
type PhaseTotals struct {
	Requests                              uint64
	Queue, Prefill, Transfer, FirstDecode float64 // seconds
}

// Totals returns the sums so far.
func (t *TTFT) Totals() PhaseTotals {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.totals
}

// NewTTFT creates the histograms on mp; every series carries model, the
// model the worker serves.
func NewTTFT(mp metric.MeterProvider, model string) (*TTFT, error) {
	m := mp.Meter(ScopeName)
	buckets := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30} // 1 ms to 30 s
	var errs []error
	hist := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	t := &TTFT{
		model:       attribute.String("model", model),
		queue:       hist("switchyard.worker.ttft.queue", "Time to first token: waiting for admission (on the prefill worker when remote)."),
		prefill:     hist("switchyard.worker.ttft.prefill", "Time to first token: prompt computation."),
		transfer:    hist("switchyard.worker.ttft.transfer", "Time to first token: remote, KV transfer not overlapped with prefill compute, plus RPC; pulled, the prefix pull's RPC (the request waits in its queue place meanwhile)."),
		firstDecode: hist("switchyard.worker.ttft.first_decode", "Time to first token: from KV import to the decode engine's first output (remote only)."),
	}
	c, err := m.Int64Counter("switchyard.worker.prefill.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Generate requests by how their prompt was prefilled (path: local, remote, pulled, fallback)."))
	errs = append(errs, err)
	t.requests = c
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return t, nil
}

// ObserveTTFT records one request's phases (it is a disagg.Observer).
func (t *TTFT) ObserveTTFT(ctx context.Context, p disagg.Phases) {
	attrs := metric.WithAttributes(t.model, attribute.String("path", p.Path))
	t.requests.Add(ctx, 1, attrs)
	t.queue.Record(ctx, p.Queue.Seconds(), attrs)
	t.prefill.Record(ctx, p.Prefill.Seconds(), attrs)
	var transfer, firstDecode float64
	switch p.Path {
	case disagg.PathRemote:
		transfer, firstDecode = p.Transfer.Seconds(), p.FirstDecode.Seconds()
		t.transfer.Record(ctx, transfer, attrs)
		t.firstDecode.Record(ctx, firstDecode, attrs)
	case disagg.PathPulled:
		transfer = p.Transfer.Seconds()
		t.transfer.Record(ctx, transfer, attrs)
	}
	t.mu.Lock()
	t.totals.Requests++
	t.totals.Queue += p.Queue.Seconds()
	t.totals.Prefill += p.Prefill.Seconds()
	t.totals.Transfer += transfer
	t.totals.FirstDecode += firstDecode
	t.mu.Unlock()
}
