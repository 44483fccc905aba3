package metrics_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"switchyard.dev/libs/cuda"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/worker/metrics"
)

type fixed engine.Metrics

func (f fixed) Metrics() engine.Metrics { return engine.Metrics(f) }

func collect(t *testing.T, r *sdkmetric.ManualReader) map[string][]float64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string][]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], float64(p.Value))
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], p.Value)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out[m.Name] = append(out[m.Name], float64(p.Value))
				}
			}
		}
	}
	return out
}

// withoutModel lists the instruments with a data point that lacks
// model=want.
func withoutModel(t *testing.T, r *sdkmetric.ManualReader, want string) []string {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []string
	check := func(name string, set attribute.Set) {
		if v, ok := set.Value("model"); !ok || v.AsString() != want {
			out = append(out, name)
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					check(m.Name, p.Attributes)
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					check(m.Name, p.Attributes)
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					check(m.Name, p.Attributes)
				}
			}
		}
	}
	return out
}

func TestRegisterObservesEngineAndGPUs(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	src := fixed{Running: 3, Waiting: 2, KVUsedBlocks: 25, KVTotalBlocks: 100, PromptTokens: 900, PrefixHitTokens: 300,
		GeneratedTokens: 77, Preemptions: 1, Steps: 40, LastStepTime: 20 * time.Millisecond, TokensPerSecond: 123.5,
		Tiers: []engine.TierMetrics{{Tier: kvtier.Host, Blocks: 4, Capacity: 8}}}
	gpus := func(context.Context) ([]cuda.GPU, error) {
		return []cuda.GPU{{Index: 0, Name: "H100", MemoryTotalBytes: 80 << 30, MemoryUsedBytes: 10 << 30, UtilizationPercent: 50}}, nil
	}
	unregister, err := metrics.Register(mp, src, gpus, metrics.WithModel("llama"))
	if err != nil {
		t.Fatal(err)
	}
	if unlabelled := withoutModel(t, reader, "llama"); len(unlabelled) > 0 {
		t.Errorf("series without model=llama: %v", unlabelled)
	}
	if _, ok := collect(t, reader)["switchyard.worker.tokens"]; ok {
		t.Error("switchyard.worker.tokens (a rate) exported; Prometheus derives it from the generated tokens counter")
	}
	got := collect(t, reader)
	for name, want := range map[string]float64{
		"switchyard.worker.requests.running":   3,
		"switchyard.worker.requests.waiting":   2,
		"switchyard.worker.kv.blocks.used":     25,
		"switchyard.worker.kv.blocks.capacity": 100,
		"switchyard.worker.kv.usage":           0.25,
		"switchyard.worker.prompt.tokens":      900,
		"switchyard.worker.prefix_hit.tokens":  300,
		"switchyard.worker.generated.tokens":   77,
		"switchyard.worker.preemptions":        1,
		"switchyard.worker.steps":              40,
		"switchyard.worker.step.time":          0.02,
		"switchyard.worker.gpu.memory.used":    10 << 30,
		"switchyard.worker.gpu.memory.total":   80 << 30,
		"switchyard.worker.gpu.utilization":    0.5,
	} {
		if v := got[name]; len(v) != 1 || v[0] != want {
			t.Errorf("%s = %v; want [%v]", name, v, want)
		}
	}
	if err := unregister(); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, reader); len(got) != 0 {
		t.Fatalf("after unregister: %v; want nothing observed", got)
	}
}

// Without a GPU function no GPU series exist.
func TestNoGPUs(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	if _, err := metrics.Register(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), fixed{}, nil); err != nil {
		t.Fatal(err)
	}
	if v, ok := collect(t, reader)["switchyard.worker.gpu.memory.used"]; ok {
		t.Fatalf("gpu memory observed without GPUs: %v", v)
	}
}
