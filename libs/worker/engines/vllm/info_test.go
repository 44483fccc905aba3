package vllm

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// engineServer answers GETs from a path → body table (404 otherwise).
func engineServer(t *testing.T, routes map[string]string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := routes[r.URL.Path]
		if !ok || r.Method != http.MethodGet {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"detail":"Not Found"}`)
			return
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

const vllmModels = `{"object":"list","data":[{"id":"meta-llama/Llama-3.1-8B-Instruct","object":"model","created":1761300000,"owned_by":"vllm","root":"meta-llama/Llama-3.1-8B-Instruct","parent":null,"max_model_len":131072}]}`

func TestCheck(t *testing.T) {
	t.Parallel()
	vllmMetrics := string(readMetrics(t, "vllm.txt"))
	sglangInfo := `{"model_path":"meta-llama/Llama-3.1-8B-Instruct","page_size":16,"disable_radix_cache":false,"kv_events_config":"{\"publisher\":\"zmq\",\"endpoint\":\"tcp://*:5557\"}","version":"0.5.4"}`
	tests := []struct {
		name      string
		kind      Kind
		routes    map[string]string
		blockSize int
		has       string // "" for success
	}{
		{"vllm", VLLM, map[string]string{"/v1/models": vllmModels, "/metrics": vllmMetrics}, 16, ""},
		{"vllm block size", VLLM, map[string]string{"/v1/models": vllmModels, "/metrics": vllmMetrics}, 32, "--block-size 32"},
		{"vllm other model", VLLM, map[string]string{"/v1/models": strings.ReplaceAll(vllmModels, "Llama-3.1-8B", "Llama-3.1-70B"), "/metrics": vllmMetrics}, 16, "not model"},
		{"vllm without prefix caching", VLLM, map[string]string{"/v1/models": vllmModels,
			"/metrics": strings.Replace(vllmMetrics, `enable_prefix_caching="True"`, `enable_prefix_caching="False"`, 1)}, 16, "--enable-prefix-caching"},
		{"not an engine", VLLM, map[string]string{}, 16, "does not answer"},
		{"sglang", SGLang, map[string]string{"/v1/models": vllmModels, "/server_info": sglangInfo}, 16, ""},
		{"older sglang", SGLang, map[string]string{"/v1/models": vllmModels, "/get_server_info": sglangInfo}, 16, ""},
		{"sglang page size", SGLang, map[string]string{"/v1/models": vllmModels, "/server_info": strings.Replace(sglangInfo, `"page_size":16`, `"page_size":1`, 1)}, 16, "--page-size 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := newClient(t, tt.kind, engineServer(t, tt.routes)).Check(t.Context(), model, tt.blockSize)
			switch {
			case tt.has == "" && err != nil:
				t.Fatal(err)
			case tt.has != "" && (err == nil || !strings.Contains(err.Error(), tt.has)):
				t.Fatalf("Check = %v; want an error containing %q", err, tt.has)
			}
		})
	}
}

func TestCheckUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	err := newClient(t, VLLM, url).Check(t.Context(), model, 16)
	if err == nil || !strings.Contains(err.Error(), url) {
		t.Fatalf("Check = %v; want an error naming %s", err, url)
	}
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{
		{Kind: VLLM, URL: "http://h:8000"}, // no model
		{Kind: 0, URL: "http://h:8000", Model: "m"},
		{Kind: SGLang, URL: "h:8000"},
		{Kind: SGLang, URL: "ftp://h"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
	for s, want := range map[string]Kind{"vllm": VLLM, "sglang": SGLang} {
		if k, err := ParseKind(s); err != nil || k != want || k.String() != s {
			t.Errorf("ParseKind(%q) = %v, %v", s, k, err)
		}
	}
	if _, err := ParseKind("tgi"); err == nil {
		t.Error("ParseKind(tgi) succeeded")
	}
}
