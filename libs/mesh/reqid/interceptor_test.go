package reqid_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/gen/switchyard/router/v1/routerv1connect"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/mesh/reqid"
)

// seen records the id each handler found in its context.
type seen struct {
	routerv1connect.UnimplementedRouterServiceHandler
	workerv1connect.UnimplementedWorkerServiceHandler
	ids chan string
}

func (s *seen) Release(ctx context.Context, _ *connect.Request[routerv1.ReleaseRequest]) (*connect.Response[routerv1.ReleaseResponse], error) {
	s.ids <- reqid.From(ctx)
	return connect.NewResponse(&routerv1.ReleaseResponse{}), nil
}

func (s *seen) Generate(ctx context.Context, _ *connect.Request[workerv1.GenerateRequest], out *connect.ServerStream[workerv1.GenerateResponse]) error {
	s.ids <- reqid.From(ctx)
	return out.Send(&workerv1.GenerateResponse{TokenIds: []uint32{1}})
}

type peers struct {
	router routerv1connect.RouterServiceClient
	worker workerv1connect.WorkerServiceClient
	seen   *seen
}

// start serves a router and a worker handler with the interceptor after
// otelconnect, as libs/mesh/server chains them, and returns clients
// chained the same way (libs/mesh/client).
func start(t *testing.T, tp trace.TracerProvider) peers {
	t.Helper()
	otel, err := otelconnect.NewInterceptor(otelconnect.WithTracerProvider(tp), otelconnect.WithPropagator(propagation.TraceContext{}),
		otelconnect.WithoutMetrics())
	if err != nil {
		t.Fatal(err)
	}
	ic := connect.WithInterceptors(otel, reqid.NewInterceptor())
	s := &seen{ids: make(chan string, 1)}
	mux := http.NewServeMux()
	mux.Handle(routerv1connect.NewRouterServiceHandler(s, ic))
	mux.Handle(workerv1connect.NewWorkerServiceHandler(s, ic))
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = true
	srv.Start()
	t.Cleanup(srv.Close)
	return peers{
		router: routerv1connect.NewRouterServiceClient(srv.Client(), srv.URL, ic),
		worker: workerv1connect.NewWorkerServiceClient(srv.Client(), srv.URL, ic),
		seen:   s,
	}
}

func TestInterceptorUnary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		ctxID    string // the caller's context
		header   string // set by the caller on the request itself
		field    string // the message's request_id
		want     string // "" means any new valid id
		wantSent bool   // the client tagged its span
	}{
		{"context id travels", "r-1", "", "gen-1", "r-1", true},
		{"caller's own header wins", "r-1", "explicit", "", "explicit", true},
		{"no header: the message's request_id", "", "", "gen-2", "gen-2", false},
		{"nothing: a new id", "", "", "", "", false},
		{"bad header and field: a new id", "", "naïve", strings.Repeat("x", reqid.MaxLen+1), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tp, rec := recorder(t)
			p := start(t, tp)
			ctx := t.Context()
			if tt.ctxID != "" {
				ctx = reqid.With(ctx, tt.ctxID)
			}
			req := connect.NewRequest(&routerv1.ReleaseRequest{RequestId: tt.field})
			if tt.header != "" {
				req.Header()[reqid.Header] = []string{tt.header}
			}
			res, err := p.router.Release(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			got := <-p.seen.ids
			switch {
			case tt.want != "" && got != tt.want:
				t.Errorf("handler saw id %q, want %q", got, tt.want)
			case tt.want == "" && (!reqid.Valid(got) || got == tt.header || got == tt.field):
				t.Errorf("handler saw id %q, want a new valid one", got)
			}
			if echo := res.Header().Get(reqid.Header); echo != got {
				t.Errorf("response header %q, want the handler's %q", echo, got)
			}
			for _, s := range rec.Ended() {
				tagged := spanID(s.Attributes())
				switch {
				case s.SpanKind() == trace.SpanKindServer && tagged != got:
					t.Errorf("server span tagged %q, want %q", tagged, got)
				case s.SpanKind() == trace.SpanKindClient && tt.wantSent && tagged != got:
					t.Errorf("client span tagged %q, want %q", tagged, got)
				case s.SpanKind() == trace.SpanKindClient && !tt.wantSent && tagged != "":
					t.Errorf("client span of a call without an id tagged %q", tagged)
				}
			}
		})
	}
}

// A server stream carries the id too, both ways, and both spans are
// tagged.
func TestInterceptorStream(t *testing.T) {
	t.Parallel()
	tp, rec := recorder(t)
	p := start(t, tp)
	stream, err := p.worker.Generate(reqid.With(t.Context(), "stream-1"), connect.NewRequest(&workerv1.GenerateRequest{RequestId: "gen-9"}))
	if err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if echo := stream.ResponseHeader().Get(reqid.Header); echo != "stream-1" {
		t.Errorf("response header %q, want stream-1", echo)
	}
	_ = stream.Close()
	if got := <-p.seen.ids; got != "stream-1" {
		t.Errorf("handler saw id %q, want stream-1", got)
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want a client and a server span", len(spans))
	}
	for _, s := range spans {
		if got := spanID(s.Attributes()); got != "stream-1" {
			t.Errorf("%v span tagged %q, want stream-1", s.SpanKind(), got)
		}
	}
}
