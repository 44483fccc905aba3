// Package metrics exports a worker's engine and GPU state as OpenTelemetry
// instruments (served for Prometheus at /metrics by libs/mesh/telemetry).
//
// Every instrument is observable: values are read from an engine snapshot
// when the exporter collects, so the generation hot path pays nothing and
// the exported numbers are the engine's own (one source of truth with
// GetLoad). Nothing here is global; each worker registers on its own
// MeterProvider and unregisters on shutdown.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"switchyard.dev/libs/cuda"
	"switchyard.dev/libs/engine"
)

// Source is what metrics reads from the engine.
type Source interface {
	Metrics() engine.Metrics
}

// GPUFunc lists the worker's GPUs with current memory and utilization.
type GPUFunc func(ctx context.Context) ([]cuda.GPU, error)

// ScopeName is the instrumentation scope of the worker's instruments.
const ScopeName = "switchyard.dev/libs/worker"

type engineInstruments struct {
	running, waiting, kvUsed, kvTotal              metric.Int64ObservableGauge
	kvUsage, stepTime                              metric.Float64ObservableGauge
	prompt, prefixHit, generated, preempted, steps metric.Int64ObservableCounter
	// Per KV tier below the arena, labelled tier=host|disk|external.
	tierBlocks, tierCapacity                       metric.Int64ObservableGauge
	tierOffloaded, tierOnboarded, tierOnboardBytes metric.Int64ObservableCounter
	tierRecompute, tierCorrupt, tierOverBudget     metric.Int64ObservableCounter
	tierWriteBehind                                metric.Int64ObservableCounter
	tierLoadTime                                   metric.Float64ObservableGauge
}

type gpuInstruments struct {
	memUsed, memTotal metric.Int64ObservableGauge
	util              metric.Float64ObservableGauge
}

// Option adjusts Register.
type Option func(*options)

type options struct{ attrs []attribute.KeyValue }

// WithModel labels every series with model=name, the model the worker
// serves: dashboards and alerts group workers by it.
func WithModel(name string) Option {
	return func(o *options) {
		if name != "" {
			o.attrs = append(o.attrs, attribute.String("model", name))
		}
	}
}

// Register creates the instruments on mp and observes src (and gpus, when
// not nil) at every collection. Call the returned func on shutdown.
//
// Generation throughput is not exported as a gauge: the counters are, and
// Prometheus computes rates over whatever window a query asks for.
func Register(mp metric.MeterProvider, src Source, gpus GPUFunc, opts ...Option) (unregister func() error, err error) {
	var cfg options
	for _, opt := range opts {
		opt(&cfg)
	}
	base := cfg.attrs
	m := mp.Meter(ScopeName)
	ei, err := newEngineInstruments(m)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	regs := make([]metric.Registration, 0, 2)
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		ei.observe(o, src.Metrics(), base)
		return nil
	}, ei.all()...)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	regs = append(regs, reg)
	if gpus != nil {
		gi, err := newGPUInstruments(m)
		if err == nil {
			reg, err = m.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
				list, err := gpus(ctx)
				gi.observe(o, list, base)
				return err
			}, gi.memUsed, gi.memTotal, gi.util)
		}
		if err != nil {
			_ = regs[0].Unregister()
			return nil, fmt.Errorf("metrics: %w", err)
		}
		regs = append(regs, reg)
	}
	return func() error {
		var errs []error
		for _, r := range regs {
			errs = append(errs, r.Unregister())
		}
		return errors.Join(errs...)
	}, nil
}

func newEngineInstruments(m metric.Meter) (*engineInstruments, error) {
	var i engineInstruments
	var errs []error
	gauge := func(name, unit, desc string) metric.Int64ObservableGauge {
		g, err := m.Int64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	fgauge := func(name, unit, desc string) metric.Float64ObservableGauge {
		g, err := m.Float64ObservableGauge(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	counter := func(name, unit, desc string) metric.Int64ObservableCounter {
		c, err := m.Int64ObservableCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	i.running = gauge("switchyard.worker.requests.running", "{request}", "Sequences in the running batch.")
	i.waiting = gauge("switchyard.worker.requests.waiting", "{request}", "Requests queued for admission.")
	i.kvUsed = gauge("switchyard.worker.kv.blocks.used", "{block}", "KV blocks held by sequences.")
	i.kvTotal = gauge("switchyard.worker.kv.blocks.capacity", "{block}", "KV blocks in the pool (used or free).")
	i.kvUsage = fgauge("switchyard.worker.kv.usage", "1", "Used over total KV blocks.")
	i.stepTime = fgauge("switchyard.worker.step.time", "s", "Executor time of the latest step.")
	i.prompt = counter("switchyard.worker.prompt.tokens", "{token}", "Prompt tokens admitted.")
	i.prefixHit = counter("switchyard.worker.prefix_hit.tokens", "{token}", "Prompt tokens served from the prefix cache.")
	i.generated = counter("switchyard.worker.generated.tokens", "{token}", "Tokens generated.")
	i.preempted = counter("switchyard.worker.preemptions", "{preemption}", "Sequences preempted for KV blocks (recomputed later).")
	i.steps = counter("switchyard.worker.steps", "{step}", "Engine steps executed.")
	i.tierBlocks = gauge("switchyard.worker.kv.tier.blocks", "{block}", "KV blocks held in a tier below the arena.")
	i.tierCapacity = gauge("switchyard.worker.kv.tier.capacity", "{block}", "KV block slots of a tier below the arena.")
	i.tierOffloaded = counter("switchyard.worker.kv.tier.offloaded", "{block}", "Blocks copied from the arena into the tier.")
	i.tierOnboarded = counter("switchyard.worker.kv.tier.onboarded", "{block}", "Blocks copied from the tier into the arena for a prompt.")
	i.tierOnboardBytes = counter("switchyard.worker.kv.tier.onboarded.bytes", "By", "Bytes copied from the tier into the arena.")
	i.tierRecompute = counter("switchyard.worker.kv.tier.recompute_instead", "{block}", "Blocks held in the tier but recomputed, loading them being slower.")
	i.tierCorrupt = counter("switchyard.worker.kv.tier.corrupt", "{block}", "Blocks dropped for failing their checksum.")
	i.tierOverBudget = counter("switchyard.worker.kv.tier.over_budget", "{block}", "Blocks not offloaded into the tier for its write budget.")
	i.tierWriteBehind = counter("switchyard.worker.kv.tier.write_behind", "{block}", "Blocks not offloaded into the tier because its writes in flight were at their limit.")
	i.tierLoadTime = fgauge("switchyard.worker.kv.tier.load.time", "s", "Measured time to load one block from the tier (moving average).")
	return &i, errors.Join(errs...)
}

func (i *engineInstruments) all() []metric.Observable {
	return []metric.Observable{
		i.running, i.waiting, i.kvUsed, i.kvTotal, i.kvUsage, i.stepTime,
		i.prompt, i.prefixHit, i.generated, i.preempted, i.steps,
		i.tierBlocks, i.tierCapacity, i.tierOffloaded, i.tierOnboarded, i.tierOnboardBytes,
		i.tierRecompute, i.tierCorrupt, i.tierOverBudget, i.tierWriteBehind, i.tierLoadTime,
	}
}

func (i *engineInstruments) observe(o metric.Observer, s engine.Metrics, base []attribute.KeyValue) {
	all := metric.WithAttributes(base...)
	o.ObserveInt64(i.running, int64(s.Running), all)
	o.ObserveInt64(i.waiting, int64(s.Waiting), all)
	o.ObserveInt64(i.kvUsed, int64(s.KVUsedBlocks), all)
	o.ObserveInt64(i.kvTotal, int64(s.KVTotalBlocks), all)
	o.ObserveFloat64(i.kvUsage, s.KVUsage(), all)
	o.ObserveFloat64(i.stepTime, s.LastStepTime.Seconds(), all)
	o.ObserveInt64(i.prompt, s.PromptTokens, all)
	o.ObserveInt64(i.prefixHit, s.PrefixHitTokens, all)
	o.ObserveInt64(i.generated, s.GeneratedTokens, all)
	o.ObserveInt64(i.preempted, s.Preemptions, all)
	o.ObserveInt64(i.steps, s.Steps, all)
	for _, t := range s.Tiers {
		tier := metric.WithAttributes(append(slices.Clip(base), attribute.String("tier", t.Tier.String()))...)
		o.ObserveInt64(i.tierBlocks, int64(t.Blocks), tier)
		o.ObserveInt64(i.tierCapacity, int64(t.Capacity), tier)
		o.ObserveInt64(i.tierOffloaded, t.Offloaded, tier)
		o.ObserveInt64(i.tierOnboarded, t.Onboarded, tier)
		o.ObserveInt64(i.tierOnboardBytes, t.OnboardBytes, tier)
		o.ObserveInt64(i.tierRecompute, t.RecomputeInstead, tier)
		o.ObserveInt64(i.tierCorrupt, t.Corrupt, tier)
		o.ObserveInt64(i.tierOverBudget, t.OverBudget, tier)
		o.ObserveInt64(i.tierWriteBehind, t.WriteBehind, tier)
		o.ObserveFloat64(i.tierLoadTime, float64(t.LoadNanosPerBlk)/1e9, tier)
	}
}

func newGPUInstruments(m metric.Meter) (*gpuInstruments, error) {
	used, err1 := m.Int64ObservableGauge("switchyard.worker.gpu.memory.used", metric.WithUnit("By"), metric.WithDescription("GPU memory in use."))
	total, err2 := m.Int64ObservableGauge("switchyard.worker.gpu.memory.total", metric.WithUnit("By"), metric.WithDescription("GPU memory size."))
	util, err3 := m.Float64ObservableGauge("switchyard.worker.gpu.utilization", metric.WithUnit("1"), metric.WithDescription("GPU utilization, 0..1."))
	return &gpuInstruments{memUsed: used, memTotal: total, util: util}, errors.Join(err1, err2, err3)
}

func (i *gpuInstruments) observe(o metric.Observer, gpus []cuda.GPU, base []attribute.KeyValue) {
	for _, g := range gpus {
		attrs := metric.WithAttributes(append(slices.Clip(base),
			attribute.String("gpu", strconv.Itoa(g.Index)),
			attribute.String("gpu_uuid", g.UUID),
			attribute.String("gpu_name", g.Name),
		)...)
		o.ObserveInt64(i.memUsed, int64(min(g.MemoryUsedBytes, 1<<62)), attrs)
		o.ObserveInt64(i.memTotal, int64(min(g.MemoryTotalBytes, 1<<62)), attrs)
		o.ObserveFloat64(i.util, float64(g.UtilizationPercent)/100, attrs)
	}
}
