// Package observe gathers the planner's inputs: per model, what users saw
// (request rate, input and output lengths, TTFT and ITL distributions)
// from the frontends' Prometheus metrics, and per worker its queue and KV
// usage from its GetLoad RPC.
//
// The frontends are the source of latency because they measure what a
// client sees, TTFT included of routing, queueing and any transfer; the
// workers are the source of load because only they know their queues.
// Each scrape is kept per frontend, and a window is the difference
// between two scrapes summed over the frontends, so a frontend that
// restarts (its counters start again from zero) contributes what it
// counted since, and one that appears contributes from its second scrape.
package observe

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"switchyard.dev/libs/mesh/discovery"
)

// The frontend's metrics the planner reads (services/frontend).
const (
	metricGenerations = "switchyard_frontend_generations_total"
	metricPrompt      = "switchyard_frontend_prompt_tokens_total"
	metricCompletion  = "switchyard_frontend_completion_tokens_total"
	metricCached      = "switchyard_frontend_cached_prompt_tokens_total"
	metricTTFT        = "switchyard_frontend_time_to_first_token_seconds"
	metricITL         = "switchyard_frontend_inter_token_latency_seconds"
	metricErrors      = "switchyard_frontend_generation_errors_total"
)

// The labels of the frontend's metrics that name the versions that served
// (services/frontend/internal/metrics.Served).
const (
	LabelRouterVersion = "router_version"
	LabelWorkerVersion = "worker_version"
)

// VersionKey names one version of the routers (Label LabelRouterVersion)
// or of the decode workers (LabelWorkerVersion).
type VersionKey struct {
	Label, Version string
}

// Side is what one version served over a window, summed over models: the
// input of the rollout judge, which compares a canary's side with its
// baseline's.
type Side struct {
	Generations, Errors float64
	TTFT, ITL           Histogram
}

// maxScrape bounds a frontend's /metrics body.
const maxScrape = 16 << 20

// Window is one model's traffic over one interval.
type Window struct {
	Model    string
	Duration time.Duration
	// Generations finished in the window, and per second.
	Generations, Rate float64
	// PrefillTokens and OutputTokens per generation: prompt tokens not
	// served from a cache, and generated tokens.
	MeanISL, MeanOSL float64
	// Mean prompt length, cached tokens included.
	MeanPrompt float64
	TTFT, ITL  Histogram
}

// counts is one model's counters and histograms at one scrape.
type counts struct {
	gens, prompt, completion, cached, errors float64
	ttft, itl                                Histogram
}

func (c counts) sub(p counts) counts {
	d := counts{gens: c.gens - p.gens, prompt: c.prompt - p.prompt, completion: c.completion - p.completion,
		cached: c.cached - p.cached, errors: c.errors - p.errors, ttft: c.ttft.sub(p.ttft), itl: c.itl.sub(p.itl)}
	if d.gens < 0 || d.prompt < 0 || d.completion < 0 || d.cached < 0 || d.errors < 0 {
		return c // the frontend restarted: everything since
	}
	return d
}

type scrape struct {
	at       time.Time
	models   map[string]counts
	versions map[VersionKey]counts
}

// Frontends turns scrapes of the frontends' /metrics into windows.
type Frontends struct {
	client   *http.Client
	mu       sync.Mutex
	last     map[string]scrape // by frontend id
	versions map[VersionKey]*Side
}

// NewFrontends returns a scraper using client (default: 2 s a call).
func NewFrontends(client *http.Client) *Frontends {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	return &Frontends{client: client, last: map[string]scrape{}}
}

// Scrape reads every frontend's metrics and returns, per model, the
// window since the previous Scrape. A frontend that does not answer is
// left out of this window (its next answer covers the gap); errs lists
// them.
func (f *Frontends) Scrape(ctx context.Context, frontends []discovery.Instance) (map[string]*Window, []error) {
	type result struct {
		id  string
		s   scrape
		err error
	}
	results := make([]result, len(frontends))
	var wg sync.WaitGroup
	for i, fe := range frontends {
		wg.Go(func() {
			s, err := f.read(ctx, fe)
			results[i] = result{id: fe.ID, s: s, err: err}
		})
	}
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]*Window{}
	versions := map[VersionKey]*Side{}
	var errs []error
	seen := map[string]bool{}
	for _, r := range results {
		seen[r.id] = true
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		prev, ok := f.last[r.id]
		f.last[r.id] = r.s
		if !ok {
			continue // the baseline of a new frontend
		}
		dur := r.s.at.Sub(prev.at)
		for m, c := range r.s.models {
			d := c.sub(prev.models[m])
			w := out[m]
			if w == nil {
				w = &Window{Model: m}
				out[m] = w
			}
			w.Duration = max(w.Duration, dur)
			w.Generations += d.gens
			w.MeanISL += d.prompt - d.cached // sums until finish
			w.MeanPrompt += d.prompt
			w.MeanOSL += d.completion
			w.TTFT.Add(d.ttft)
			w.ITL.Add(d.itl)
		}
		for k, c := range r.s.versions {
			d := c.sub(prev.versions[k])
			v := versions[k]
			if v == nil {
				v = &Side{}
				versions[k] = v
			}
			v.Generations += d.gens
			v.Errors += d.errors
			v.TTFT.Add(d.ttft)
			v.ITL.Add(d.itl)
		}
	}
	f.versions = versions
	for id := range f.last {
		if !seen[id] {
			delete(f.last, id)
		}
	}
	for _, w := range out {
		if w.Duration > 0 {
			w.Rate = w.Generations / w.Duration.Seconds()
		}
		if w.Generations > 0 {
			w.MeanISL /= w.Generations
			w.MeanPrompt /= w.Generations
			w.MeanOSL /= w.Generations
		} else {
			w.MeanISL, w.MeanPrompt, w.MeanOSL = 0, 0, 0
		}
	}
	return out, errs
}

// Versions is what each version served over the last Scrape's window.
func (f *Frontends) Versions() map[VersionKey]Side {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[VersionKey]Side, len(f.versions))
	for k, v := range f.versions {
		out[k] = *v
	}
	return out
}

func (f *Frontends) read(ctx context.Context, fe discovery.Instance) (scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fe.URL()+"/metrics", nil)
	if err != nil {
		return scrape{}, err
	}
	at := time.Now()
	res, err := f.client.Do(req)
	if err != nil {
		return scrape{}, fmt.Errorf("observe: frontend %s: %w", fe.ID, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return scrape{}, fmt.Errorf("observe: frontend %s: /metrics answered %s", fe.ID, res.Status)
	}
	models, versions, err := parse(io.LimitReader(res.Body, maxScrape))
	if err != nil {
		return scrape{}, fmt.Errorf("observe: frontend %s: %w", fe.ID, err)
	}
	return scrape{at: at, models: models, versions: versions}, nil
}

// parse reads a frontend's metrics in Prometheus text format into
// per-model counts, summed over endpoints, and per-version counts of the
// routers and workers that served, summed over models.
func parse(r io.Reader) (map[string]counts, map[VersionKey]counts, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: %w", err)
	}
	out := map[string]counts{}
	versions := map[VersionKey]counts{}
	for name, fam := range fams {
		for _, m := range fam.GetMetric() {
			mod := label(m, "model")
			if mod == "" {
				continue
			}
			c := out[mod]
			if !count(&c, name, m) {
				continue
			}
			out[mod] = c
			for _, l := range []string{LabelRouterVersion, LabelWorkerVersion} {
				if v := label(m, l); v != "" {
					k := VersionKey{Label: l, Version: v}
					c := versions[k]
					count(&c, name, m)
					versions[k] = c
				}
			}
		}
	}
	return out, versions, nil
}

// count adds sample m of metric name to c; false for a metric the planner
// does not read.
func count(c *counts, name string, m *dto.Metric) bool {
	switch name {
	case metricGenerations:
		c.gens += m.GetCounter().GetValue()
	case metricErrors:
		c.errors += m.GetCounter().GetValue()
	case metricPrompt:
		c.prompt += m.GetCounter().GetValue()
	case metricCompletion:
		c.completion += m.GetCounter().GetValue()
	case metricCached:
		c.cached += m.GetCounter().GetValue()
	case metricTTFT:
		c.ttft.Add(buckets(m.GetHistogram()))
	case metricITL:
		c.itl.Add(buckets(m.GetHistogram()))
	default:
		return false
	}
	return true
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// buckets turns cumulative buckets into per-bucket counts ending at +Inf.
func buckets(h *dto.Histogram) Histogram {
	bs := h.GetBucket()
	sort.Slice(bs, func(i, j int) bool { return bs[i].GetUpperBound() < bs[j].GetUpperBound() })
	out := Histogram{}
	prev := 0.0
	for _, b := range bs {
		if math.IsInf(b.GetUpperBound(), 1) {
			continue
		}
		out.Bounds = append(out.Bounds, b.GetUpperBound())
		out.Counts = append(out.Counts, max(float64(b.GetCumulativeCount())-prev, 0))
		prev = float64(b.GetCumulativeCount())
	}
	out.Bounds = append(out.Bounds, math.Inf(1))
	out.Counts = append(out.Counts, max(float64(h.GetSampleCount())-prev, 0))
	return out
}
