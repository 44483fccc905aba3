// Package telemetry builds the tracing and metrics of one service instance.
//
// Nothing here touches OpenTelemetry's or Prometheus's global state: each
// instance gets its own TracerProvider, MeterProvider and Prometheus
// registry, so two instances of a service can live in one test process.
//
// Tracing follows the OTEL_* environment variables: OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none (the default) turns it off; "console" (or
// "stdout") prints spans; "otlp" exports over OTLP/HTTP to
// OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT). Metrics are always
// on and served for Prometheus by MetricsHandler.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"

	"connectrpc.com/otelconnect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config names the instance and where its spans go.
type Config struct {
	Service    string
	Version    string
	InstanceID string
	// Getenv reads OTEL_* settings; nil means no tracing.
	Getenv func(string) string
	// Stdout receives spans when the exporter is "console".
	Stdout io.Writer
	// SpanProcessor, if set, receives every span as well, whatever the
	// OTEL_* settings say (tracing is then on): for tests that collect
	// spans (tracetest.SpanRecorder) and for embedding.
	SpanProcessor sdktrace.SpanProcessor
}

// Telemetry holds one instance's providers.
type Telemetry struct {
	Tracer     trace.TracerProvider
	Meter      metric.MeterProvider
	Propagator propagation.TextMapPropagator
	Registry   *prometheus.Registry

	shutdown []func(context.Context) error
}

// New builds the providers. The caller must call Shutdown.
func New(ctx context.Context, cfg Config) (*Telemetry, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	res := resource.NewSchemaless(
		semconv.ServiceName(cfg.Service),
		semconv.ServiceVersion(cfg.Version),
		semconv.ServiceInstanceID(cfg.InstanceID),
	)
	t := &Telemetry{
		Propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
		Registry:   prometheus.NewRegistry(),
	}
	t.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo(cfg))
	exp, err := otelprom.New(otelprom.WithRegisterer(t.Registry), otelprom.WithoutScopeInfo())
	if err != nil {
		return nil, fmt.Errorf("telemetry: prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithResource(res))
	t.Meter = mp
	t.shutdown = append(t.shutdown, mp.Shutdown)

	spanExp, err := spanExporter(ctx, getenv, cfg.Stdout)
	if err != nil {
		_ = mp.Shutdown(ctx)
		return nil, err
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if spanExp != nil {
		opts = append(opts, sdktrace.WithBatcher(spanExp))
	}
	if cfg.SpanProcessor != nil {
		opts = append(opts, sdktrace.WithSpanProcessor(cfg.SpanProcessor))
	}
	if len(opts) == 1 {
		t.Tracer = noop.NewTracerProvider()
		return t, nil
	}
	tp := sdktrace.NewTracerProvider(opts...)
	t.Tracer = tp
	t.shutdown = append(t.shutdown, tp.Shutdown)
	return t, nil
}

func spanExporter(ctx context.Context, getenv func(string) string, stdout io.Writer) (sdktrace.SpanExporter, error) {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	switch kind := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))); kind {
	case "", "none":
		return nil, nil
	case "console", "stdout":
		if stdout == nil {
			stdout = io.Discard
		}
		return stdouttrace.New(stdouttrace.WithWriter(stdout))
	case "otlp":
		if p := getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" && p != "http/protobuf" {
			return nil, fmt.Errorf("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL=%q: only http/protobuf is supported", p)
		}
		return otlptracehttp.New(ctx)
	default:
		return nil, fmt.Errorf("telemetry: OTEL_TRACES_EXPORTER=%q: want none, console or otlp", kind)
	}
}

// buildInfo is the switchyard_build_info gauge, always 1: its labels say
// which service and version an instance runs, so dashboards can join on it
// and a fleet mid-rollout shows its versions side by side.
func buildInfo(cfg Config) prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "switchyard_build_info",
		Help: "Always 1; the labels name the service, its version and the Go toolchain that built it.",
		ConstLabels: prometheus.Labels{
			"service":     strings.TrimPrefix(cfg.Service, "switchyard-"),
			"version":     cfg.Version,
			"instance_id": cfg.InstanceID,
			"go_version":  runtime.Version(),
		},
	})
	g.Set(1)
	return g
}

// MetricsHandler serves the instance's metrics in Prometheus format.
func (t *Telemetry) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(t.Registry, promhttp.HandlerOpts{Registry: t.Registry})
}

// ConnectInterceptor returns an otelconnect interceptor that records RPC
// spans and metrics with the instance's providers and carries the trace
// context with its propagator. Servers and clients both use it, so the two
// ends of a call are traced alike. A handler's span is a child of its
// caller's (otelconnect would otherwise start a new trace linked to it):
// the callers are the mesh's own services, and one client request is one
// trace across all of them.
func (t *Telemetry) ConnectInterceptor() (*otelconnect.Interceptor, error) {
	return otelconnect.NewInterceptor(
		otelconnect.WithTracerProvider(t.Tracer),
		otelconnect.WithMeterProvider(t.Meter),
		otelconnect.WithPropagator(t.Propagator),
		otelconnect.WithTrustRemote(),
	)
}

// HTTPHandler wraps h, a plain HTTP handler, in a server span per
// request, recorded and propagated as ConnectInterceptor does for RPCs: a
// request with a traceparent header continues the caller's trace, and the
// calls h makes with the request's context are children of its span.
// Spans are named by method and the pattern that routed the request
// ("POST /v1/"), never by its path, which may carry ids.
func (t *Telemetry) HTTPHandler(h http.Handler) http.Handler {
	return otelhttp.NewHandler(h, "http",
		otelhttp.WithTracerProvider(t.Tracer),
		otelhttp.WithMeterProvider(t.Meter),
		otelhttp.WithPropagators(t.Propagator),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.Pattern == "" {
				return r.Method
			}
			if strings.HasPrefix(r.Pattern, r.Method+" ") {
				return r.Pattern
			}
			return r.Method + " " + r.Pattern
		}),
	)
}

// Shutdown flushes and stops the providers.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}
