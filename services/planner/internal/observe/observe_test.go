package observe

import (
	"bytes"
	"context"
	"math"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"switchyard.dev/libs/mesh/discovery"
)

// frontend is a stand-in for a frontend's /metrics: the same metric
// names, labels and buckets, from a real client_golang registry.
type frontend struct {
	reg                              *prometheus.Registry
	gens, prompt, completion, cached *prometheus.CounterVec
	ttft, itl                        *prometheus.HistogramVec
	srv                              *httptest.Server
}

func newFrontend(t *testing.T) *frontend {
	t.Helper()
	f := &frontend{reg: prometheus.NewRegistry()}
	counter := func(name string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name}, []string{"model"})
		f.reg.MustRegister(c)
		return c
	}
	f.gens, f.prompt, f.completion, f.cached = counter(metricGenerations), counter(metricPrompt), counter(metricCompletion), counter(metricCached)
	f.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: metricTTFT, Buckets: prometheus.ExponentialBuckets(0.001, 2, 17)}, []string{"endpoint", "model"})
	f.itl = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: metricITL, Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17)}, []string{"endpoint", "model"})
	f.reg.MustRegister(f.ttft, f.itl)
	f.srv = httptest.NewServer(promhttp.HandlerFor(f.reg, promhttp.HandlerOpts{}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *frontend) instance(id string) discovery.Instance {
	return discovery.Instance{ID: id, Role: discovery.RoleFrontend, Address: strings.TrimPrefix(f.srv.URL, "http://")}
}

// serve records n generations of model with the given lengths and
// latencies, split over two endpoints.
func (f *frontend) serve(model string, n int, prompt, cached, out int, ttft, itl float64) {
	for i := range n {
		ep := []string{"completions", "chat_completions"}[i%2]
		f.gens.WithLabelValues(model).Inc()
		f.prompt.WithLabelValues(model).Add(float64(prompt))
		f.cached.WithLabelValues(model).Add(float64(cached))
		f.completion.WithLabelValues(model).Add(float64(out))
		f.ttft.WithLabelValues(ep, model).Observe(ttft)
		for range out - 1 {
			f.itl.WithLabelValues(ep, model).Observe(itl)
		}
	}
}

func TestWindows(t *testing.T) {
	t.Parallel()
	a, b := newFrontend(t), newFrontend(t)
	fes := []discovery.Instance{a.instance("frontend-0"), b.instance("frontend-1")}
	s := NewFrontends(nil)
	a.serve("m", 5, 100, 0, 10, 0.2, 0.01) // before the baseline: not counted
	if w, errs := s.Scrape(context.Background(), fes); len(w) != 0 || len(errs) != 0 {
		t.Fatalf("the first scrape is a baseline: %v %v", w, errs)
	}
	a.serve("m", 10, 300, 100, 20, 0.3, 0.02)
	b.serve("m", 30, 300, 100, 20, 1.5, 0.02)
	b.serve("other", 4, 10, 0, 5, 0.1, 0.01)
	w, errs := s.Scrape(context.Background(), fes)
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	m := w["m"]
	if m == nil || m.Generations != 40 || m.MeanISL != 200 || m.MeanPrompt != 300 || m.MeanOSL != 20 || m.Rate <= 0 {
		t.Fatalf("window of m: %+v", m)
	}
	if got := m.TTFT.Total(); got != 40 {
		t.Errorf("TTFT samples %v, want 40", got)
	}
	// 30 of 40 at 1.5 s: the p90 lies in 1.5 s's bucket (1.024, 2.048].
	if p := m.TTFT.Quantile(0.9); p < 1.024 || p > 2.048 {
		t.Errorf("TTFT p90 %v, want in (1.024, 2.048]", p)
	}
	if f := m.TTFT.FractionAbove(1.0); math.Abs(f-0.75) > 0.02 {
		t.Errorf("TTFT above 1 s: %v, want 0.75", f)
	}
	if w["other"] == nil || w["other"].Generations != 4 {
		t.Errorf("window of other: %+v", w["other"])
	}
	// A frontend that restarts counts from zero again: its new counts are
	// the window, never a negative rate.
	a2 := newFrontend(t)
	a2.serve("m", 3, 50, 0, 5, 0.1, 0.01)
	fes[0] = a2.instance("frontend-0")
	w, _ = s.Scrape(context.Background(), fes)
	if w["m"] == nil || w["m"].Generations != 3 {
		t.Errorf("after a restart: %+v", w["m"])
	}
	// A frontend that does not answer is left out and named.
	a2.srv.Close()
	if _, errs := s.Scrape(context.Background(), fes); len(errs) != 1 || !strings.Contains(errs[0].Error(), "frontend-0") {
		t.Errorf("errors %v, want frontend-0 named", errs)
	}
}

func TestHistogram(t *testing.T) {
	t.Parallel()
	h := Histogram{Bounds: []float64{1, 2, 4, math.Inf(1)}, Counts: []float64{10, 0, 10, 0}}
	for _, tc := range []struct{ q, want float64 }{{0.25, 0.5}, {0.5, 1}, {0.75, 3}, {1, 4}} {
		if got := h.Quantile(tc.q); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("q%.2f = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := h.FractionAbove(3); math.Abs(got-0.25) > 1e-9 {
		t.Errorf("above 3: %v, want 0.25", got)
	}
	if (Histogram{}).Quantile(0.9) != 0 || (Histogram{}).FractionAbove(1) != 0 {
		t.Error("an empty histogram has no quantiles")
	}
	inf := Histogram{Bounds: []float64{1, math.Inf(1)}, Counts: []float64{0, 5}}
	if got := inf.Quantile(0.9); got != 1 {
		t.Errorf("samples past the last bound: q90 %v, want the bound 1", got)
	}
}

// FuzzParse: the metrics reader never panics, and accepts what a real
// registry writes.
func FuzzParse(f *testing.F) {
	var seed bytes.Buffer
	seed.WriteString("# TYPE switchyard_frontend_generations_total counter\nswitchyard_frontend_generations_total{model=\"m\"} 3\n")
	seed.WriteString("# TYPE switchyard_frontend_time_to_first_token_seconds histogram\n" +
		"switchyard_frontend_time_to_first_token_seconds_bucket{endpoint=\"c\",model=\"m\",le=\"0.5\"} 1\n" +
		"switchyard_frontend_time_to_first_token_seconds_bucket{endpoint=\"c\",model=\"m\",le=\"+Inf\"} 2\n" +
		"switchyard_frontend_time_to_first_token_seconds_sum{endpoint=\"c\",model=\"m\"} 1.2\n" +
		"switchyard_frontend_time_to_first_token_seconds_count{endpoint=\"c\",model=\"m\"} 2\n")
	f.Add(seed.Bytes())
	f.Add([]byte("garbage{"))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, versions, err := parse(bytes.NewReader(b))
		if err != nil {
			return
		}
		for _, c := range out {
			_ = c.ttft.Quantile(0.9)
			_ = c.itl.FractionAbove(0.01)
		}
		for _, c := range versions {
			_ = c.ttft.Quantile(0.99)
		}
	})
}

// TestVersions: a window per version of the routers and workers that
// served, from the frontend's served labels, summed over models and
// endpoints; a version's errors count apart from its generations.
func TestVersions(t *testing.T) {
	reg := prometheus.NewRegistry()
	labels := []string{"model", LabelRouterVersion, LabelWorkerVersion}
	gens := prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricGenerations}, labels)
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: metricErrors}, labels)
	ttft := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: metricTTFT, Buckets: prometheus.ExponentialBuckets(0.001, 2, 17)}, append([]string{"endpoint"}, labels...))
	reg.MustRegister(gens, errs, ttft)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	fe := []discovery.Instance{{ID: "f", Role: discovery.RoleFrontend, Address: strings.TrimPrefix(srv.URL, "http://")}}
	f := NewFrontends(nil)
	if _, errs := f.Scrape(t.Context(), fe); len(errs) > 0 {
		t.Fatal(errs)
	}
	for i := range 30 {
		worker := "1"
		if i%3 == 0 {
			worker = "2"
		}
		model := []string{"a", "b"}[i%2]
		gens.WithLabelValues(model, "r1", worker).Inc()
		ttft.WithLabelValues("chat", model, "r1", worker).Observe(map[string]float64{"1": 0.01, "2": 0.5}[worker])
	}
	errs.WithLabelValues("a", "r1", "2").Add(4)
	if _, errs := f.Scrape(t.Context(), fe); len(errs) > 0 {
		t.Fatal(errs)
	}
	v := f.Versions()
	old, canary, router := v[VersionKey{LabelWorkerVersion, "1"}], v[VersionKey{LabelWorkerVersion, "2"}], v[VersionKey{LabelRouterVersion, "r1"}]
	if old.Generations != 20 || canary.Generations != 10 || router.Generations != 30 {
		t.Errorf("generations: worker 1 %v, worker 2 %v, router %v; want 20, 10, 30", old.Generations, canary.Generations, router.Generations)
	}
	if old.Errors != 0 || canary.Errors != 4 {
		t.Errorf("errors: worker 1 %v, worker 2 %v; want 0, 4", old.Errors, canary.Errors)
	}
	if p := canary.TTFT.Quantile(0.5); p < 0.25 || p > 0.6 {
		t.Errorf("canary TTFT p50 %v, want about 0.5", p)
	}
	if p := old.TTFT.Quantile(0.5); p > 0.02 {
		t.Errorf("baseline TTFT p50 %v, want about 0.01", p)
	}
}
