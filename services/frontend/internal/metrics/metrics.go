// Package metrics defines the frontend's Prometheus metrics. They are
// registered on the instance's own registry (never the global one), so two
// frontends can run in one test process.
package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the frontend's collectors.
type Metrics struct {
	Requests         *prometheus.CounterVec   // endpoint, status
	TTFT             *prometheus.HistogramVec // endpoint, model, router_version, worker_version
	ITL              *prometheus.HistogramVec // endpoint, model, router_version, worker_version
	Duration         *prometheus.HistogramVec // endpoint
	InFlight         *prometheus.GaugeVec     // endpoint
	PromptTokens     *prometheus.CounterVec   // model
	CompletionTokens *prometheus.CounterVec   // model
	CachedTokens     *prometheus.CounterVec   // model
	Generations      *prometheus.CounterVec   // model, router_version, worker_version
	GenerationErrors *prometheus.CounterVec   // model, router_version, worker_version
	Migrations       *prometheus.CounterVec   // model
}

// Served are the labels that say which versions served a generation: a
// canary's latency and errors read apart from its baseline's (package
// canary; the planner's rollout judge compares them). Empty when no
// router answered.
var Served = []string{"router_version", "worker_version"}

// latency buckets from 1ms to ~65s.
var latency = prometheus.ExponentialBuckets(0.001, 2, 17)

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	const ns = "switchyard_frontend"
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "requests_total",
			Help: "HTTP API requests by endpoint and status code."}, []string{"endpoint", "status"}),
		TTFT: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "time_to_first_token_seconds",
			Help: "Time from request arrival to the first generated token.", Buckets: latency}, append([]string{"endpoint", "model"}, Served...)),
		ITL: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "inter_token_latency_seconds",
			Help: "Time between generated tokens.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17)}, append([]string{"endpoint", "model"}, Served...)),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "request_duration_seconds",
			Help: "End-to-end request latency.", Buckets: latency}, []string{"endpoint"}),
		InFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "requests_in_flight",
			Help: "Requests being served."}, []string{"endpoint"}),
		PromptTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "prompt_tokens_total",
			Help: "Prompt tokens of finished requests."}, []string{"model"}),
		CompletionTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "completion_tokens_total",
			Help: "Generated tokens of finished requests."}, []string{"model"}),
		CachedTokens: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "cached_prompt_tokens_total",
			Help: "Prompt tokens of finished requests served from a KV cache (the rest were prefilled)."}, []string{"model"}),
		Generations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "generations_total",
			Help: "Generations that finished (streamed to the end or answered whole)."}, append([]string{"model"}, Served...)),
		GenerationErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "generation_errors_total",
			Help: "Generations that failed after their request was accepted (routing or a worker failed; not a client leaving)."}, append([]string{"model"}, Served...)),
		Migrations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "migrations_total",
			Help: "Generations moved to another worker after a stream broke."}, []string{"model"}),
	}
	for _, c := range []prometheus.Collector{m.Requests, m.TTFT, m.ITL, m.Duration, m.InFlight, m.PromptTokens, m.CompletionTokens, m.CachedTokens, m.Generations, m.GenerationErrors, m.Migrations} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return m, nil
}
