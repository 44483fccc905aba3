package client_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	meshv1 "switchyard.dev/gen/switchyard/mesh/v1"
	"switchyard.dev/gen/switchyard/mesh/v1/meshv1connect"
	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/rpclimit"
	"switchyard.dev/libs/mesh/telemetry"
)

// TestOptionsTraceAndPropagate checks that a call made with Options records
// a client span with the instance's tracer and sends its trace context to
// the callee.
func TestOptionsTraceAndPropagate(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	prop := propagation.TraceContext{}
	tel := &telemetry.Telemetry{Tracer: tp, Meter: noop.NewMeterProvider(), Propagator: prop}

	got := make(chan trace.SpanContext, 1)
	mux := http.NewServeMux()
	path, h := meshv1connect.NewInfoServiceHandler(meshv1connect.UnimplementedInfoServiceHandler{})
	mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- trace.SpanContextFromContext(prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		h.ServeHTTP(w, r)
	}))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.Start()
	t.Cleanup(srv.Close)

	opts, err := client.Options(tel)
	if err != nil {
		t.Fatal(err)
	}
	c := meshv1connect.NewInfoServiceClient(srv.Client(), srv.URL, opts...)
	if _, err := c.GetInfo(t.Context(), connect.NewRequest(&meshv1.GetInfoRequest{})); connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("GetInfo: %v, want Unimplemented", err)
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans recorded, want 1", len(spans))
	}
	if kind := spans[0].SpanKind(); kind != trace.SpanKindClient {
		t.Errorf("span kind %v, want client", kind)
	}
	remote := <-got
	if !remote.IsValid() || remote.TraceID() != spans[0].SpanContext().TraceID() {
		t.Errorf("callee saw trace context %v, want the client span's trace %v", remote.TraceID(), spans[0].SpanContext().TraceID())
	}
}

func TestOptionsNilTelemetry(t *testing.T) {
	t.Parallel()
	if _, err := client.Options(nil); err == nil {
		t.Fatal("Options(nil): no error")
	}
}

// deadlines records whether each GetInfo call arrived with a deadline.
type deadlines struct {
	meshv1connect.UnimplementedInfoServiceHandler
	got chan time.Duration // time left; -1: no deadline
}

func (d *deadlines) GetInfo(ctx context.Context, _ *connect.Request[meshv1.GetInfoRequest]) (*connect.Response[meshv1.GetInfoResponse], error) {
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	d.got <- left
	return connect.NewResponse(&meshv1.GetInfoResponse{}), nil
}

// A unary call whose context has no deadline gets the configured one; a
// caller's own deadline is left as it is.
func TestOptionsUnaryDeadline(t *testing.T) {
	t.Parallel()
	d := &deadlines{got: make(chan time.Duration, 1)}
	mux := http.NewServeMux()
	mux.Handle(meshv1connect.NewInfoServiceHandler(d))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.Start()
	t.Cleanup(srv.Close)
	tel := &telemetry.Telemetry{Tracer: tracenoop.NewTracerProvider(), Meter: noop.NewMeterProvider(), Propagator: propagation.TraceContext{}}
	opts, err := client.OptionsWith(tel, rpclimit.Limits{UnaryTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c := meshv1connect.NewInfoServiceClient(srv.Client(), srv.URL, opts...)
	if _, err := c.GetInfo(t.Context(), connect.NewRequest(&meshv1.GetInfoRequest{})); err != nil {
		t.Fatal(err)
	}
	if left := <-d.got; left <= time.Hour-time.Minute || left > time.Hour {
		t.Errorf("a call without a deadline arrived with %v left; want the hour of Limits.UnaryTimeout", left)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Hour)
	defer cancel()
	if _, err := c.GetInfo(ctx, connect.NewRequest(&meshv1.GetInfoRequest{})); err != nil {
		t.Fatal(err)
	}
	if left := <-d.got; left <= time.Hour {
		t.Errorf("a call with a 2h deadline arrived with %v left; want the caller's deadline kept", left)
	}
	bare := meshv1connect.NewInfoServiceClient(srv.Client(), srv.URL)
	if _, err := bare.GetInfo(t.Context(), connect.NewRequest(&meshv1.GetInfoRequest{})); err != nil {
		t.Fatal(err)
	}
	if left := <-d.got; left != -1 {
		t.Errorf("a client without the options sent a deadline (%v left)", left)
	}
}
