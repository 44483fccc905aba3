package vllm

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func readMetrics(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "metrics", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseLoadRecorded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		kind     Kind
		fixture  string
		want     Load
		hashAlgo string
	}{
		{VLLM, "vllm.txt", Load{Running: 3, Waiting: 2, KVUsage: 0.4375, BlockSize: 16}, "sha256"},
		// Before vLLM v1: gpu_cache_usage_perc, no engine label.
		{VLLM, "vllm-v0.txt", Load{Running: 7, Waiting: 0, KVUsage: 0.91, BlockSize: 32}, ""},
		// Two data-parallel engines: counts summed, usage averaged.
		{VLLM, "vllm-dp2.txt", Load{Running: 10, Waiting: 1, KVUsage: 0.5, BlockSize: 16}, "sha256_cbor"},
		{SGLang, "sglang.txt", Load{Running: 12, Waiting: 5, KVUsage: 0.28}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			t.Parallel()
			got, err := ParseLoad(tt.kind, readMetrics(t, tt.fixture))
			if err != nil {
				t.Fatal(err)
			}
			if got.CacheConfig["prefix_caching_hash_algo"] != tt.hashAlgo {
				t.Errorf("cache config %v; want prefix_caching_hash_algo %q", got.CacheConfig, tt.hashAlgo)
			}
			got.CacheConfig = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("load %+v; want %+v", got, tt.want)
			}
		})
	}
}

func TestParseLoadRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		kind Kind
		text string
		has  string
	}{
		{"SGLang scrape read as vLLM", VLLM, string(readMetrics(t, "sglang.txt")), "vllm:num_requests_running"},
		{"SGLang without --enable-metrics", SGLang, "# nothing\n", "--enable-metrics"},
		{"no usage", VLLM, "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n", "vllm:kv_cache_usage_perc"},
		{"engines disagree on the block size", VLLM, "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0\n" +
			`vllm:cache_config_info{block_size="16"} 1` + "\n" + `vllm:cache_config_info{block_size="32"} 1` + "\n", "different block sizes"},
		{"bad block size", VLLM, "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0\n" +
			`vllm:cache_config_info{block_size="x"} 1` + "\n", "block_size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := ParseLoad(tt.kind, []byte(tt.text)); err == nil || !strings.Contains(err.Error(), tt.has) {
				t.Errorf("ParseLoad = %v; want an error naming %q", err, tt.has)
			}
		})
	}
}

func TestScanSamples(t *testing.T) {
	t.Parallel()
	text := "# TYPE x gauge\n" +
		"x 1\n" +
		"x{a=\"b\"} 2 1761300000000\n" + // with a timestamp
		"x{a=\"}\\\" {\",b=\"c\"} 3\n" + // a brace and a quote inside a value
		"   x{} +Inf\n" +
		"x{a=\"b\"} NaN\n" +
		"x{a=\"b\" 4\n" + // unterminated: skipped
		"x\n" + // no value: skipped
		"xy 5\n" + // another name
		"x{a=\"b\"} 6 # {trace_id=\"1\"} 1\n" // an exemplar
	var got []float64
	var labels []string
	scanSamples([]byte(text), func(n []byte) bool { return string(n) == "x" }, func(_ string, l []byte, v float64) {
		got = append(got, v)
		labels = append(labels, string(l))
	})
	if len(got) != 6 || got[0] != 1 || got[1] != 2 || got[2] != 3 || got[5] != 6 {
		t.Fatalf("values %v", got)
	}
	m, err := parseLabels([]byte(labels[2]))
	if err != nil || !reflect.DeepEqual(m, map[string]string{"a": "}\" {", "b": "c"}) {
		t.Fatalf("labels %q → %v, %v", labels[2], m, err)
	}
	for _, bad := range []string{`a`, `a=b`, `a="b`, `="b"`, `a="\`} {
		if _, err := parseLabels([]byte(bad)); err == nil {
			t.Errorf("parseLabels(%q) succeeded", bad)
		}
	}
}

func TestClientLoad(t *testing.T) {
	t.Parallel()
	data := readMetrics(t, "vllm.txt")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write(data)
	}))
	defer srv.Close()
	l, err := newClient(t, VLLM, srv.URL).Load(t.Context())
	if err != nil || l.Running != 3 || l.BlockSize != 16 {
		t.Fatalf("Load = %+v, %v", l, err)
	}
}

func FuzzParseLoad(f *testing.F) {
	for _, name := range []string{"vllm.txt", "vllm-v0.txt", "vllm-dp2.txt", "sglang.txt"} {
		f.Add(readMetrics(f, name))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		for _, k := range []Kind{VLLM, SGLang} {
			l, err := ParseLoad(k, text)
			if err == nil && (l.KVUsage < 0 || l.KVUsage > 1 || l.BlockSize < 0) {
				t.Fatalf("%v: %+v", k, l)
			}
		}
	})
}

func BenchmarkParseLoad(b *testing.B) {
	data := readMetrics(b, "vllm.txt")
	b.ReportAllocs()
	for range b.N {
		if _, err := ParseLoad(VLLM, data); err != nil {
			b.Fatal(err)
		}
	}
}
