package upstream

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/reqid"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

// routersWithIDs is a Routers over fr whose calls send the request id, as
// the frontend's (libs/mesh/client) do.
func routersWithIDs(fr *upstreamtest.Router) *Routers {
	return NewRouters(NewHTTPClient(), slog.New(slog.DiscardHandler), []string{fr.URL}, connect.WithInterceptors(reqid.NewInterceptor()))
}

// A request's Route and the Report of its own reports carry its request
// id; a Report that batches several requests' reports carries none.
func TestReportsCarryTheRequestID(t *testing.T) {
	t.Parallel()
	fr := upstreamtest.StartRouter(t, upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w"}))
	r := routersWithIDs(fr)
	ctx := reqid.With(t.Context(), "client-1")
	routed, err := r.Route(ctx, &routerv1.RouteRequest{RequestId: "gen-1", Model: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	r.PrefillDone(ctx, routed.Replica, "gen-1")
	r.Release(ctx, routed.Replica, "gen-1")
	flush(t, r)
	if got := fr.RequestIDs("Route"); !slices.Equal(got, []string{"client-1"}) {
		t.Errorf("Route request ids %q, want [client-1]", got)
	}
	for _, got := range fr.RequestIDs("Report") {
		if got != "client-1" {
			t.Errorf("Report of one request's reports carried request id %q, want client-1", got)
		}
	}

	// Many requests' reports wait behind a held Report and go in one.
	release := fr.HoldReports()
	r.Release(reqid.With(t.Context(), "client-2"), fr.URL, "gen-2") // in flight, held
	deptest.Eventually(t, 10*time.Second, "the Report held", func() bool { return fr.Held() == 1 })
	for i := range 5 {
		r.Release(reqid.With(t.Context(), fmt.Sprint("other-", i)), fr.URL, fmt.Sprint("gen-o", i))
	}
	release()
	flush(t, r)
	got := fr.RequestIDs("Report")
	if len(got) < 2 || got[len(got)-2] != "client-2" || got[len(got)-1] != "" {
		t.Errorf("Report request ids %q; want ..., client-2 (alone), \"\" (a batch of several requests)", got)
	}
}

// Against a router without Report, each single call carries its own
// request's id.
func TestSingleReportsCarryTheirRequestIDs(t *testing.T) {
	t.Parallel()
	fr := upstreamtest.StartRouter(t, upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w"}))
	fr.WithoutReport()
	r := routersWithIDs(fr)
	for _, id := range []string{"a", "b"} {
		ctx := reqid.With(t.Context(), "client-"+id)
		r.PrefillDone(ctx, fr.URL, id)
		r.Release(ctx, fr.URL, id)
		flush(t, r)
	}
	want := []string{"client-a", "client-b"}
	if got := fr.RequestIDs("PrefillDone"); !slices.Equal(got, want) {
		t.Errorf("PrefillDone request ids %q, want %q", got, want)
	}
	if got := fr.RequestIDs("Release"); !slices.Equal(got, want) {
		t.Errorf("Release request ids %q, want %q", got, want)
	}
}

// A report's context keeps its request's id and trace, and nothing that
// would cancel it: the request may be over when the report goes.
func TestOriginContext(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(reqid.With(t.Context(), "r-1"), "request")
	span.End()
	ctx, cancel := context.WithCancel(ctx)
	o := originOf(ctx)
	cancel()
	got := o.context()
	if got.Err() != nil {
		t.Errorf("the report's context ended with its request: %v", got.Err())
	}
	if id := reqid.From(got); id != "r-1" {
		t.Errorf("request id %q, want r-1", id)
	}
	if sc := trace.SpanContextFromContext(got); sc.TraceID() != span.SpanContext().TraceID() {
		t.Errorf("trace %v, want the request's %v", sc.TraceID(), span.SpanContext().TraceID())
	}
	if c := common([]report{{id: "x", from: o}}, []report{{id: "y", from: o}}); c.reqID != o.reqID || !c.span.Equal(o.span) {
		t.Errorf("common of one request's reports = %+v, want its origin", c)
	}
	if c := common([]report{{id: "x", from: o}, {id: "z", from: originOf(reqid.With(t.Context(), "r-2"))}}); c.reqID != "" || c.span.IsValid() {
		t.Errorf("common of two requests' reports = %+v, want none", c)
	}
	if c := common([]report{{id: "x"}}); c.reqID != "" || c.span.IsValid() {
		t.Errorf("common of reports without a request = %+v, want none", c)
	}
}
