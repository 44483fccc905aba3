package vllm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
)

// Load is an engine's momentary load, as its /metrics report it.
type Load struct {
	Running int     // requests being decoded or prefilled
	Waiting int     // requests queued
	KVUsage float64 // fraction of the KV cache in use, in [0, 1]
	// BlockSize is vLLM's block size (vllm:cache_config_info's
	// block_size label); 0 when not published (SGLang: see Info).
	BlockSize int
	// CacheConfig holds every label of vllm:cache_config_info
	// (enable_prefix_caching, prefix_caching_hash_algo, num_gpu_blocks,
	// ...); nil for SGLang.
	CacheConfig map[string]string
}

// metricNames are the gauges Load reads, per engine.
type metricNames struct {
	running, waiting string
	usage            []string // the first one present wins
	cacheConfig      string
	hint             string // how to make the engine publish them
}

func metricsOf(kind Kind) (metricNames, bool) {
	switch kind {
	case VLLM:
		return metricNames{running: "vllm:num_requests_running", waiting: "vllm:num_requests_waiting",
			usage:       []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"},
			cacheConfig: "vllm:cache_config_info", hint: "is this a vLLM server (not started with --disable-log-stats)?"}, true
	case SGLang:
		return metricNames{running: "sglang:num_running_reqs", waiting: "sglang:num_queue_reqs",
			usage: []string{"sglang:token_usage"}, hint: "is this an SGLang server started with --enable-metrics?"}, true
	}
	return metricNames{}, false
}

// set is every name to read.
func (m *metricNames) set() map[string]bool {
	s := map[string]bool{m.running: true, m.waiting: true}
	for _, u := range m.usage {
		s[u] = true
	}
	if m.cacheConfig != "" {
		s[m.cacheConfig] = true
	}
	return s
}

// maxScrape bounds a /metrics answer.
const maxScrape = 16 << 20

// Load scrapes the engine's /metrics.
func (c *Client) Load(ctx context.Context) (Load, error) {
	res, err := c.do(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return Load{}, err
	}
	defer res.Body.Close()
	text, err := io.ReadAll(io.LimitReader(res.Body, maxScrape))
	if err != nil {
		return Load{}, fmt.Errorf("vllm: GET %s: %w", c.url("/metrics"), err)
	}
	l, err := ParseLoad(c.cfg.Kind, text)
	if err != nil {
		return Load{}, fmt.Errorf("vllm: %s: %w", c.url("/metrics"), err)
	}
	return l, nil
}

// ParseLoad reads a Prometheus text scrape of engine kind. Counts are
// summed over the series of one name (data-parallel ranks), the usage
// fraction averaged; NaN samples are ignored.
func ParseLoad(kind Kind, text []byte) (Load, error) {
	names, ok := metricsOf(kind)
	if !ok {
		return Load{}, fmt.Errorf("engine kind %v: want vllm or sglang", kind)
	}
	type agg struct {
		sum float64
		n   int
	}
	got := map[string]*agg{}
	var cacheLabels [][]byte
	wanted := names.set()
	scanSamples(text, func(name []byte) bool { return wanted[string(name)] }, func(name string, labels []byte, v float64) {
		if name == names.cacheConfig {
			cacheLabels = append(cacheLabels, labels)
			return
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		a := got[name]
		if a == nil {
			a = &agg{}
			got[name] = a
		}
		a.sum += v
		a.n++
	})
	var l Load
	for _, m := range []struct {
		name string
		dst  *int
	}{{names.running, &l.Running}, {names.waiting, &l.Waiting}} {
		a := got[m.name]
		if a == nil {
			return Load{}, fmt.Errorf("no %s sample: %s", m.name, names.hint)
		}
		*m.dst = int(math.Round(a.sum))
	}
	usage := false
	for _, name := range names.usage {
		if a := got[name]; a != nil {
			l.KVUsage, usage = min(max(a.sum/float64(a.n), 0), 1), true
			break
		}
	}
	if !usage {
		return Load{}, fmt.Errorf("no %s sample: %s", names.usage[0], names.hint)
	}
	if err := l.cacheConfig(cacheLabels); err != nil {
		return Load{}, fmt.Errorf("%s: %w", names.cacheConfig, err)
	}
	return l, nil
}

// cacheConfig reads vllm:cache_config_info's labels; every series (one
// per engine core) must agree on the block size.
func (l *Load) cacheConfig(sets [][]byte) error {
	for _, raw := range sets {
		labels, err := parseLabels(raw)
		if err != nil {
			return err
		}
		if l.CacheConfig == nil {
			l.CacheConfig = labels
		}
		s, ok := labels["block_size"]
		if !ok {
			continue
		}
		bs, err := strconv.Atoi(s)
		if err != nil || bs <= 0 {
			return fmt.Errorf("block_size %q is not a positive integer", s)
		}
		if l.BlockSize != 0 && l.BlockSize != bs {
			return errors.New("engines report different block sizes")
		}
		l.BlockSize = bs
	}
	return nil
}
