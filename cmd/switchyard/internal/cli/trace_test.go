package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/reqid"
)

// One chat completion through frontend, router and decode worker, all in
// this process with one span recorder: every span it causes, in every
// service, is in one trace (the client's), carries the request id the
// client sent, and the router and the worker log that id.
func TestOneTracePerRequest(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a mesh")
	}
	rec := tracetest.NewSpanRecorder()
	front, model, logs := startTracedMesh(t, rec)

	const (
		clientID = "trace-test-7f3a"
		traceID  = "4bf92f3577b34da6a3ce929d0e0e4736"
		parent   = "00f067aa0ba902b7"
	)
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":4,"stream":true}`
	resp := post(t, front+"/v1/chat/completions", body, map[string]string{
		reqid.Header: clientID, "traceparent": "00-" + traceID + "-" + parent + "-01"})
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.body, "[DONE]") {
		t.Fatalf("stream: status %d, body %s", resp.StatusCode, resp.body)
	}
	if got := resp.Header.Get(reqid.Header); got != clientID {
		t.Errorf("streamed response's %s = %q, want the client's %q", reqid.Header, got, clientID)
	}

	// The frontend's reports to the router go in the background, after
	// the answer: wait for their spans too.
	want := []struct {
		name string
		kind trace.SpanKind
	}{
		{"POST /v1/", trace.SpanKindServer},
		{"switchyard.router.v1.RouterService/Route", trace.SpanKindClient},
		{"switchyard.router.v1.RouterService/Route", trace.SpanKindServer},
		{"switchyard.worker.v1.WorkerService/Generate", trace.SpanKindClient},
		{"switchyard.worker.v1.WorkerService/Generate", trace.SpanKindServer},
		{"switchyard.router.v1.RouterService/Report", trace.SpanKindClient},
		{"switchyard.router.v1.RouterService/Report", trace.SpanKindServer},
	}
	var spans []sdktrace.ReadOnlySpan
	missing := func() []string {
		spans = inTrace(rec.Ended(), traceID)
		var out []string
		for _, w := range want {
			if !hasSpan(spans, w.name, w.kind) {
				out = append(out, w.kind.String()+" "+w.name)
			}
		}
		return out
	}
	for wait := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		m := missing()
		if len(m) == 0 {
			break
		}
		if time.Now().After(wait) {
			t.Fatalf("the request's trace lacks %q; it has:\n%s", m, describe(spans))
		}
	}
	services := map[string]bool{}
	for _, s := range spans {
		services[serviceOf(s)] = true
		if k := s.SpanKind(); k == trace.SpanKindClient || k == trace.SpanKindServer {
			if got := taggedID(s); got != clientID {
				t.Errorf("%v span %q of %s tagged request id %q, want %q", k, s.Name(), serviceOf(s), got, clientID)
			}
		}
		if s.Name() == "POST /v1/" && s.Parent().SpanID().String() != parent {
			t.Errorf("the frontend's span has parent %s, want the client's %s", s.Parent().SpanID(), parent)
		}
	}
	for _, svc := range []string{"switchyard-frontend", "switchyard-router", "switchyard-decode"} {
		if !services[svc] {
			t.Errorf("no span of %s in the request's trace (services: %v)", svc, services)
		}
	}
	// No span tagged with the request id is outside its trace.
	for _, s := range rec.Ended() {
		if taggedID(s) == clientID && s.SpanContext().TraceID().String() != traceID {
			t.Errorf("span %q of %s has the request id but trace %s, want %s", s.Name(), serviceOf(s), s.SpanContext().TraceID(), traceID)
		}
	}
	for _, svc := range []string{"service=router", "service=decode", "service=frontend"} {
		if !logged(logs.String(), svc, "request_id="+clientID) {
			t.Errorf("no %s log line with request_id=%s", svc, clientID)
		}
	}

	// A request without an id or a trace gets both from the frontend, and
	// the worker sees the same id.
	resp = post(t, front+"/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`, nil)
	id := resp.Header.Get(reqid.Header)
	if resp.StatusCode != http.StatusOK || !reqid.Valid(id) {
		t.Fatalf("status %d, %s %q: want 200 and a new valid id", resp.StatusCode, reqid.Header, id)
	}
	deptest.Eventually(t, 30*time.Second, "the worker's span of the second request", func() bool {
		for _, s := range rec.Ended() {
			if s.Name() == "switchyard.worker.v1.WorkerService/Generate" && s.SpanKind() == trace.SpanKindServer && taggedID(s) == id {
				return true
			}
		}
		return false
	})

	// Errors echo the id too.
	resp = post(t, front+"/v1/chat/completions", `{"model":"no-such-model","messages":[{"role":"user","content":"Hi"}]}`,
		map[string]string{reqid.Header: "err-1"})
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get(reqid.Header) != "err-1" {
		t.Errorf("unknown model: status %d, %s %q; want 404 and err-1", resp.StatusCode, reqid.Header, resp.Header.Get(reqid.Header))
	}
}

// startTracedMesh runs decode, router and frontend in this process, every
// span to rec, at debug level, and returns the frontend's URL, the model
// it serves and the logs.
func startTracedMesh(t *testing.T, rec sdktrace.SpanProcessor) (front, model string, logs *syncBuffer) {
	t.Helper()
	var mu sync.Mutex
	addrs := map[string]net.Addr{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	logs = &syncBuffer{}
	go func() {
		done <- Run(ctx, Env{
			Args: []string{"-discovery-dir", t.TempDir(), "-listen", "127.0.0.1:0", "-drain-timeout", "1s", "-log-level", "debug",
				"decode", "--", "router", "--", "frontend"},
			Stdout: logs, Stderr: logs, SpanProcessor: rec,
			Ready: func(name string, a net.Addr) { mu.Lock(); addrs[name] = a; mu.Unlock() },
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("services did not stop")
		}
	})
	deptest.Eventually(t, 30*time.Second, "three services serving", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if a, ok := addrs["frontend"]; ok && len(addrs) == 3 {
			front = "http://" + a.String()
			return true
		}
		return false
	})
	deptest.Eventually(t, 30*time.Second, "a model listed", func() bool {
		resp, err := http.Get(front + "/v1/models")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var list struct {
			Data []struct{ ID string } `json:"data"`
		}
		if json.NewDecoder(resp.Body).Decode(&list) != nil || len(list.Data) == 0 {
			return false
		}
		model = list.Data[0].ID
		return true
	})
	// The frontend may list the worker's model before it knows a router.
	warm := `{"model":"` + model + `","prompt":"Hi","max_tokens":1}`
	deptest.Eventually(t, 30*time.Second, "a first completion", func() bool {
		resp, err := http.Post(front+"/v1/completions", "application/json", strings.NewReader(warm))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK
	})
	return front, model, logs
}

type response struct {
	*http.Response
	body string
}

func post(t *testing.T, url, body string, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp, string(b)}
}

func describe(spans []sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s %v %q request_id=%q\n", serviceOf(s), s.SpanKind(), s.Name(), taggedID(s))
	}
	return b.String()
}

func inTrace(spans []sdktrace.ReadOnlySpan, traceID string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanContext().TraceID().String() == traceID {
			out = append(out, s)
		}
	}
	return out
}

func hasSpan(spans []sdktrace.ReadOnlySpan, name string, kind trace.SpanKind) bool {
	for _, s := range spans {
		if s.Name() == name && s.SpanKind() == kind {
			return true
		}
	}
	return false
}

func taggedID(s sdktrace.ReadOnlySpan) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == reqid.SpanAttribute {
			return a.Value.AsString()
		}
	}
	return ""
}

func serviceOf(s sdktrace.ReadOnlySpan) string {
	for _, a := range s.Resource().Attributes() {
		if a.Key == "service.name" {
			return a.Value.AsString()
		}
	}
	return ""
}

// logged reports whether one line of logs has all of parts.
func logged(logs string, parts ...string) bool {
	for line := range strings.SplitSeq(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
