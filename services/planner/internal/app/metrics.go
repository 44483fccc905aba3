package app

import (
	"github.com/prometheus/client_golang/prometheus"

	"switchyard.dev/services/planner/internal/policy"
)

// metrics are the planner's, prefix switchyard_planner_.
type metrics struct {
	desired, model *prometheus.GaugeVec   // model, role
	correction     *prometheus.GaugeVec   // model, role
	decisions      *prometheus.CounterVec // model, role, rule
	scaleActions   *prometheus.CounterVec // model, role, direction
	actuatorErrors *prometheus.CounterVec // model, role
	scaleUp        *prometheus.HistogramVec
	leader         prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns = "switchyard_planner"
	pool := []string{"model", "role"}
	m := &metrics{
		desired: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "desired_replicas",
			Help: "Replicas the planner wants per pool."}, pool),
		model: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "model_replicas",
			Help: "Replicas the throughput model alone asks for, before stabilization."}, pool),
		correction: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "correction_ratio",
			Help: "Observed over expected latency: the online correction of the profile."}, pool),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "decisions_total",
			Help: "Planning steps by the rule that decided."}, append(pool, "rule")),
		scaleActions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "scaled_replicas_total",
			Help: "Replicas added (direction up) or removed (down) through the actuator."}, append(pool, "direction")),
		actuatorErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "actuator_errors_total",
			Help: "Scaling calls the actuator refused (retried the next interval)."}, pool),
		scaleUp: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "scale_up_seconds",
			Help: "From a scale-up decision to the new replicas serving (in discovery).", Buckets: prometheus.ExponentialBuckets(0.25, 2, 10)}, pool),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "leader",
			Help: "1 while this planner holds the leader lock and acts."}),
	}
	for _, c := range []prometheus.Collector{m.desired, m.model, m.correction, m.decisions, m.scaleActions, m.actuatorErrors, m.scaleUp, m.leader} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *metrics) decided(model, role string, d policy.PoolDecision) {
	m.desired.WithLabelValues(model, role).Set(float64(d.Desired))
	m.model.WithLabelValues(model, role).Set(float64(d.Model))
	m.correction.WithLabelValues(model, role).Set(d.Correction)
	m.decisions.WithLabelValues(model, role, string(d.Rule)).Inc()
}

func (m *metrics) scaled(model, role string, delta int) {
	switch {
	case delta > 0:
		m.scaleActions.WithLabelValues(model, role, "up").Add(float64(delta))
	case delta < 0:
		m.scaleActions.WithLabelValues(model, role, "down").Add(float64(-delta))
	}
}
