package route

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"switchyard.dev/services/router/internal/load"
)

// metrics are the router's instruments, built from an injected meter.
type metrics struct {
	decisions metric.Int64Counter
	requested metric.Int64Counter
	matched   metric.Int64Counter
	hitRatio  metric.Float64Histogram
	overlap   metric.Float64Histogram
}

func newMetrics(m metric.Meter, loads *load.Tracker) (*metrics, error) {
	var out metrics
	var err error
	if out.decisions, err = m.Int64Counter("switchyard.router.decisions", metric.WithDescription("Routing decisions, by mode and the decode worker's group (canary or baseline)."), metric.WithUnit("{decision}")); err != nil {
		return nil, err
	}
	if out.requested, err = m.Int64Counter("switchyard.router.requested_blocks", metric.WithDescription("Prompt blocks of routed requests."), metric.WithUnit("{block}")); err != nil {
		return nil, err
	}
	if out.matched, err = m.Int64Counter("switchyard.router.matched_blocks", metric.WithDescription("Prompt blocks the chosen worker already cached (device tier)."), metric.WithUnit("{block}")); err != nil {
		return nil, err
	}
	if out.hitRatio, err = m.Float64Histogram("switchyard.router.hit_ratio", metric.WithDescription("Matched / requested prompt blocks per decision."),
		metric.WithExplicitBucketBoundaries(0, 0.1, 0.25, 0.5, 0.75, 0.9, 1)); err != nil {
		return nil, err
	}
	if out.overlap, err = m.Float64Histogram("switchyard.router.overlap_blocks", metric.WithDescription("Tier-weighted overlap credit of the chosen worker."), metric.WithUnit("{block}")); err != nil {
		return nil, err
	}
	prefill, err := m.Float64ObservableGauge("switchyard.router.predicted_prefill_blocks", metric.WithDescription("Predicted active prefill blocks per worker."))
	if err != nil {
		return nil, err
	}
	decode, err := m.Float64ObservableGauge("switchyard.router.predicted_decode_blocks", metric.WithDescription("Predicted decode blocks per worker."))
	if err != nil {
		return nil, err
	}
	_, err = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		for id, l := range loads.All() {
			attr := metric.WithAttributes(attribute.String("worker", id))
			o.ObserveFloat64(prefill, l.Prefill, attr)
			o.ObserveFloat64(decode, l.Decode, attr)
		}
		return nil
	}, prefill, decode)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// record counts one decision. Every series carries model, so the hit
// ratio of one model is not hidden by another's traffic.
// Decisions also say whether the decode worker was a canary, so the
// share a canary got can be read next to the share it was given.
func (m *metrics) record(ctx context.Context, model, mode, worker string, canary bool, requested, matched int, overlap float64) {
	mod := attribute.String("model", model)
	group := "baseline"
	if canary {
		group = "canary"
	}
	m.decisions.Add(ctx, 1, metric.WithAttributes(mod, attribute.String("mode", mode), attribute.String("group", group)))
	m.requested.Add(ctx, int64(requested), metric.WithAttributes(mod))
	m.matched.Add(ctx, int64(matched), metric.WithAttributes(mod))
	if requested > 0 {
		m.hitRatio.Record(ctx, float64(matched)/float64(requested), metric.WithAttributes(mod))
	}
	m.overlap.Record(ctx, overlap, metric.WithAttributes(mod, attribute.String("worker", worker)))
}
