package reqid_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"switchyard.dev/libs/mesh/reqid"
)

func TestValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   string
		want bool
	}{
		{"abc-123", true},
		{"0123456789abcdef0123456789abcdef", true},
		{"with inner space", true},
		{"!~{}[]<>\"'", true},
		{strings.Repeat("x", reqid.MaxLen), true},
		{strings.Repeat("x", reqid.MaxLen+1), false},
		{"", false},
		{" leading", false},
		{"trailing ", false},
		{"new\nline", false},
		{"carriage\rreturn", false},
		{"tab\there", false},
		{"nul\x00", false},
		{"del\x7f", false},
		{"naïve", false},
		{"\xff\xfe", false},
	}
	for _, tt := range tests {
		if got := reqid.Valid(tt.id); got != tt.want {
			t.Errorf("Valid(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		id := reqid.New()
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("New() = %q, want 32 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("New() repeated %q", id)
		}
		seen[id] = true
	}
	if got := reqid.OrNew("mine"); got != "mine" {
		t.Errorf("OrNew(valid) = %q, want it kept", got)
	}
	if got := reqid.OrNew("bad\n"); !reqid.Valid(got) || got == "bad\n" {
		t.Errorf("OrNew(invalid) = %q, want a new valid id", got)
	}
}

func TestContext(t *testing.T) {
	t.Parallel()
	if got := reqid.From(t.Context()); got != "" {
		t.Errorf("From(empty context) = %q", got)
	}
	if got := reqid.From(reqid.With(t.Context(), "r1")); got != "r1" {
		t.Errorf("From(With(r1)) = %q", got)
	}
}

// recorder returns a tracer provider whose spans rec records.
func recorder(t *testing.T) (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, rec
}

func spanID(attrs []attribute.KeyValue) string {
	for _, a := range attrs {
		if string(a.Key) == reqid.SpanAttribute {
			return a.Value.AsString()
		}
	}
	return ""
}

// Handler keeps a valid client id, replaces a bad or missing one, and
// echoes the id on every kind of answer: success, error, and a stream
// whose headers go out with its first event.
func TestHandler(t *testing.T) {
	t.Parallel()
	answers := map[string]http.HandlerFunc{
		"ok":    func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) },
		"error": func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusServiceUnavailable) },
		"sse": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: 1\n\n"))
			_ = http.NewResponseController(w).Flush()
			_, _ = w.Write([]byte("data: [DONE]\n\n"))
		},
	}
	sent := []struct {
		name   string
		header string
		keep   bool
	}{
		{"valid", "client-7", true},
		{"none", "", false},
		{"control bytes", "a\x01b", false},
		{"too long", strings.Repeat("z", reqid.MaxLen+1), false},
		{"non-ASCII", "ü", false},
	}
	for kind, answer := range answers {
		for _, s := range sent {
			t.Run(kind+"/"+s.name, func(t *testing.T) {
				t.Parallel()
				var seen string
				h := reqid.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					seen = reqid.From(r.Context())
					answer(w, r)
				}))
				req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/chat/completions", nil)
				if s.header != "" {
					req.Header[reqid.Header] = []string{s.header} // as sent, unvalidated
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				got := w.Result().Header.Get(reqid.Header)
				if got != seen {
					t.Errorf("echoed %q, the handler saw %q", got, seen)
				}
				if s.keep && got != s.header {
					t.Errorf("echoed %q, want the client's %q", got, s.header)
				}
				if !s.keep && (got == s.header || !reqid.Valid(got)) {
					t.Errorf("echoed %q for a client's %q; want a new valid id", got, s.header)
				}
			})
		}
	}
}

// An id already in the context (a handler outside gave one) is kept, and
// the span of the request is tagged with it.
func TestHandlerKeepsContextIDAndTagsSpan(t *testing.T) {
	t.Parallel()
	tp, rec := recorder(t)
	h := reqid.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	ctx, span := tp.Tracer("test").Start(reqid.With(t.Context(), "outer"), "http")
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	req.Header.Set(reqid.Header, "client")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	span.End()
	if got := w.Result().Header.Get(reqid.Header); got != "outer" {
		t.Errorf("echoed %q, want the context's %q", got, "outer")
	}
	if got := spanID(rec.Ended()[0].Attributes()); got != "outer" {
		t.Errorf("span tagged %q, want %q", got, "outer")
	}
}

func TestLogHandler(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(reqid.LogHandler(slog.NewTextHandler(&buf, nil))).With("service", "router")
	ctx := reqid.With(t.Context(), "r-9")
	log.InfoContext(ctx, "route", "worker", "w1")
	log.WithGroup("g").InfoContext(ctx, "grouped")
	log.Info("background")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines: %q", len(lines), buf.String())
	}
	if !strings.Contains(lines[0], "request_id=r-9") || !strings.Contains(lines[0], "service=router") {
		t.Errorf("line with a request's context: %q; want request_id=r-9 and the logger's attributes", lines[0])
	}
	if !strings.Contains(lines[1], "request_id=r-9") {
		t.Errorf("grouped line: %q; want the id", lines[1])
	}
	if strings.Contains(lines[2], "request_id") {
		t.Errorf("line without a request: %q; want no id", lines[2])
	}
}
