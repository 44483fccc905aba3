package telemetry

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

func TestExporterFromEnv(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env     map[string]string
		noop    bool
		wantErr string
	}{
		{env: nil, noop: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none"}, noop: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"}, noop: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "console"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, wantErr: `OTEL_TRACES_EXPORTER="zipkin"`},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantErr: "OTEL_EXPORTER_OTLP_PROTOCOL"},
	}
	for _, tc := range cases {
		t.Run(tc.env["OTEL_TRACES_EXPORTER"]+tc.wantErr, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			tel, err := New(context.Background(), Config{Service: "s", Version: "v", InstanceID: "i",
				Getenv: func(k string) string { return tc.env[k] }, Stdout: &out})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tel.Shutdown(context.Background()) }()
			_, isNoop := tel.Tracer.(noop.TracerProvider)
			if isNoop != tc.noop {
				t.Fatalf("noop tracer = %v; want %v", isNoop, tc.noop)
			}
		})
	}
}

// Spans go to stdout with the console exporter.
func TestConsoleExporterWritesSpans(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	tel, err := New(context.Background(), Config{Service: "svc", Getenv: func(k string) string {
		return map[string]string{"OTEL_TRACES_EXPORTER": "console"}[k]
	}, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.Tracer.Tracer("test").Start(context.Background(), "hello-span")
	span.End()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "hello-span") {
		t.Fatalf("stdout lacks the span: %q", out.String())
	}
}

// A span processor set in the config gets every span, with tracing off in
// the environment, and with the instance's resource.
func TestSpanProcessor(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tel, err := New(context.Background(), Config{Service: "svc", InstanceID: "svc-1", SpanProcessor: rec})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.Tracer.Tracer("test").Start(context.Background(), "recorded")
	span.End()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Name() != "recorded" {
		t.Fatalf("recorded %d spans, want the one", len(spans))
	}
	var service string
	for _, a := range spans[0].Resource().Attributes() {
		if a.Key == "service.name" {
			service = a.Value.AsString()
		}
	}
	if service != "svc" {
		t.Errorf("span of service %q, want svc", service)
	}
}

// Every instance exports switchyard_build_info with its service (without
// the switchyard- prefix), version and instance id.
func TestBuildInfo(t *testing.T) {
	t.Parallel()
	tel, err := New(t.Context(), Config{Service: "switchyard-router", Version: "1.2.3", InstanceID: "router-0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	rec := httptest.NewRecorder()
	tel.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{"# TYPE switchyard_build_info gauge", `instance_id="router-0"`, `service="router"`, `version="1.2.3"`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}
