package httpapi

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/reqid"
	"switchyard.dev/services/frontend/internal/auth"
	"switchyard.dev/services/frontend/internal/catalog"
	"switchyard.dev/services/frontend/internal/generate"
	"switchyard.dev/services/frontend/internal/metrics"
	"switchyard.dev/services/frontend/internal/upstream"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

// stack is a frontend API over fake workers and a fake router.
type stack struct {
	URL     string
	Router  *upstreamtest.Router
	Workers []*upstreamtest.Worker
	Reg     *prometheus.Registry
	Metrics *metrics.Metrics
	routers *upstream.Routers
}

// releases returns the request ids released at the router once the
// frontend's background reports were sent.
func (s *stack) releases(t testing.TB) []string {
	t.Helper()
	if err := s.routers.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s.Router.Releases()
}

type stackConfig struct {
	workers    []upstreamtest.WorkerConfig
	attempts   int
	guard      *auth.Guard
	maxBody    int64
	noRouter   bool
	noAttempts bool
	aliases    map[string]string
	// wrap, if set, wraps the generator the API runs.
	wrap func(Generator) Generator
}

func newStack(t testing.TB, cfg stackConfig) *stack {
	t.Helper()
	if len(cfg.workers) == 0 {
		cfg.workers = []upstreamtest.WorkerConfig{{ID: "w1"}}
	}
	if cfg.attempts == 0 && !cfg.noAttempts {
		cfg.attempts = 3
	}
	s := &stack{Reg: prometheus.NewRegistry()}
	reg := upstreamtest.NewRegistry()
	var ins []discovery.Instance
	for _, wc := range cfg.workers {
		w := upstreamtest.StartWorker(t, wc)
		s.Workers = append(s.Workers, w)
		ins = append(ins, upstreamtest.WorkerInstance(w))
	}
	reg.Set(discovery.RoleDecode, ins...)
	s.Router = upstreamtest.StartRouter(t, s.Workers...)
	hc := upstream.NewHTTPClient()
	log := slog.New(slog.DiscardHandler)
	var urls []string
	if !cfg.noRouter {
		urls = []string{s.Router.URL}
	}
	// The request id travels as the service's clients send it
	// (libs/mesh/client).
	ids := connect.WithInterceptors(reqid.NewInterceptor())
	routers := upstream.NewRouters(hc, log, urls, ids)
	s.routers = routers
	workers := upstream.NewWorkers(hc, ids)
	cat := catalog.New(catalog.Config{Registry: reg, Dialer: workers, Logger: log})
	if err := cat.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	m, err := metrics.New(s.Reg)
	if err != nil {
		t.Fatal(err)
	}
	s.Metrics = m
	var gen Generator = generate.New(generate.Config{Router: routers, Dialer: workers, MigrationAttempts: cfg.attempts,
		OnMigrate: func(model string) { m.Migrations.WithLabelValues(model).Inc() }})
	if cfg.wrap != nil {
		gen = cfg.wrap(gen)
	}
	api, err := New(Config{
		Catalog: cat, Metrics: m, Guard: cfg.guard, Logger: log, MaxBodyBytes: cfg.maxBody, Version: "test", Aliases: cfg.aliases,
		Generator: gen,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// post sends a JSON body and returns the response.
func (s *stack) post(t testing.TB, path, body string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// decode reads a JSON response body into v.
func decode(t testing.TB, resp *http.Response, v any) {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
}

// events reads SSE data payloads until EOF.
func events(t testing.TB, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		out = append(out, data)
	}
	return out
}

// want is the text fake workers produce for a prompt of p tokens.
func want(p, n int) string {
	s := strings.Repeat(upstreamtest.Script, 1+(p+n)/len(upstreamtest.Script))
	return s[p : p+n]
}

func chatBody(extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"model":"tiny","messages":[{"role":"user","content":"Hi"}]` + extra + `}`
}

// chatPromptLen is the token count of chatBody's prompt: BOS plus
// "User: Hi\nAssistant:" in the byte tokenizer.
const chatPromptLen = 1 + len("User: Hi\nAssistant:")
