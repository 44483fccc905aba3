package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	meshv1 "switchyard.dev/gen/switchyard/mesh/v1"
	"switchyard.dev/gen/switchyard/mesh/v1/meshv1connect"
	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/gen/switchyard/router/v1/routerv1connect"
	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/reqid"
	"switchyard.dev/libs/mesh/rpclimit"
	"switchyard.dev/libs/mesh/server"
	"switchyard.dev/libs/mesh/telemetry"
)

// syncBuffer is a log sink the server's goroutines may write at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// releases is a router handler that records the request id its context
// carries.
type releases struct {
	routerv1connect.UnimplementedRouterServiceHandler
	ids chan string
}

func (r *releases) Release(ctx context.Context, _ *connect.Request[routerv1.ReleaseRequest]) (*connect.Response[routerv1.ReleaseResponse], error) {
	r.ids <- reqid.From(ctx)
	return connect.NewResponse(&routerv1.ReleaseResponse{}), nil
}

type running struct {
	url  string
	tel  *telemetry.Telemetry
	rec  *tracetest.SpanRecorder
	rel  *releases
	logs *syncBuffer
	srv  *server.Server
}

// start serves a server configured by cfg (Telemetry, Logger and Listen
// filled in) with a router handler mounted, and with mount's handlers,
// until the test ends.
func start(t *testing.T, cfg server.Config, mount func(*server.Server)) *running {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	r := &running{
		tel:  &telemetry.Telemetry{Tracer: tp, Meter: noop.NewMeterProvider(), Propagator: propagation.TraceContext{}, Registry: prometheus.NewRegistry()},
		rec:  rec,
		rel:  &releases{ids: make(chan string, 1)},
		logs: &syncBuffer{},
	}
	cfg.Telemetry, cfg.Listen = r.tel, "127.0.0.1:0"
	cfg.Instance = discovery.Instance{ID: "router-1", Role: discovery.RoleRouter, Version: "test"}
	cfg.Logger = slog.New(reqid.LogHandler(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.Mount(routerv1connect.NewRouterServiceHandler(r.rel, srv.HandlerOptions()...))
	if mount != nil {
		mount(srv)
	}
	addr, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	r.url, r.srv = "http://"+addr.String(), srv
	return r
}

func (r *running) clients(t *testing.T, l rpclimit.Limits) (routerv1connect.RouterServiceClient, meshv1connect.InfoServiceClient) {
	t.Helper()
	opts, err := client.OptionsWith(r.tel, l)
	if err != nil {
		t.Fatal(err)
	}
	hc := client.NewHTTP()
	return routerv1connect.NewRouterServiceClient(hc, r.url, opts...), meshv1connect.NewInfoServiceClient(hc, r.url, opts...)
}

// incompressible returns n bytes of seeded random text.
func incompressible(n int) string {
	b := make([]byte, n*3/4)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// Every message past the limit fails its call with ResourceExhausted, in
// either direction and at either end; a message within it goes through.
func TestMessageLimits(t *testing.T) {
	t.Parallel()
	const limit = 64 << 10
	big := incompressible(2 * limit) // gzip must not shrink it under the limit
	info := func(res *meshv1.GetInfoResponse) { res.Meta = map[string]string{"big": big} }
	small := start(t, server.Config{MaxMessageBytes: limit}, nil)
	bigInfo := start(t, server.Config{MaxMessageBytes: limit, Info: info}, nil)
	roomy := start(t, server.Config{Info: info}, nil)

	tests := []struct {
		name string
		call func(t *testing.T) error
		want connect.Code // 0: success
	}{
		{"request within the server's limit", func(t *testing.T) error {
			rc, _ := small.clients(t, rpclimit.Limits{})
			_, err := rc.Release(t.Context(), connect.NewRequest(&routerv1.ReleaseRequest{RequestId: strings.Repeat("x", limit/2)}))
			<-small.rel.ids
			return err
		}, 0},
		{"request past the server's read limit", func(t *testing.T) error {
			rc, _ := small.clients(t, rpclimit.Limits{})
			_, err := rc.Release(t.Context(), connect.NewRequest(&routerv1.ReleaseRequest{RequestId: big}))
			return err
		}, connect.CodeResourceExhausted},
		{"response past the server's send limit", func(t *testing.T) error {
			_, ic := bigInfo.clients(t, rpclimit.Limits{})
			_, err := ic.GetInfo(t.Context(), connect.NewRequest(&meshv1.GetInfoRequest{}))
			return err
		}, connect.CodeResourceExhausted},
		{"response past the client's read limit", func(t *testing.T) error {
			_, ic := roomy.clients(t, rpclimit.Limits{MaxMessageBytes: limit})
			_, err := ic.GetInfo(t.Context(), connect.NewRequest(&meshv1.GetInfoRequest{}))
			return err
		}, connect.CodeResourceExhausted},
		{"response within the default limits", func(t *testing.T) error {
			_, ic := roomy.clients(t, rpclimit.Limits{})
			_, err := ic.GetInfo(t.Context(), connect.NewRequest(&meshv1.GetInfoRequest{}))
			return err
		}, 0},
		{"request past the client's send limit", func(t *testing.T) error {
			rc, _ := roomy.clients(t, rpclimit.Limits{MaxMessageBytes: limit})
			_, err := rc.Release(t.Context(), connect.NewRequest(&routerv1.ReleaseRequest{RequestId: big}))
			return err
		}, connect.CodeResourceExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(t)
			switch {
			case tt.want == 0 && err != nil:
				t.Fatalf("call failed: %v", err)
			case tt.want != 0 && connect.CodeOf(err) != tt.want:
				t.Fatalf("call: %v, want %v", err, tt.want)
			}
		})
	}
}

// The request id of the caller's context reaches the handler, its log
// line and its span.
func TestRequestID(t *testing.T) {
	t.Parallel()
	r := start(t, server.Config{}, nil)
	rc, _ := r.clients(t, rpclimit.Limits{})
	res, err := rc.Release(reqid.With(t.Context(), "client-42"), connect.NewRequest(&routerv1.ReleaseRequest{RequestId: "gen-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := <-r.rel.ids; got != "client-42" {
		t.Errorf("handler saw request id %q, want client-42", got)
	}
	if got := res.Header().Get(reqid.Header); got != "client-42" {
		t.Errorf("response header %q, want client-42", got)
	}
	if logs := r.logs.String(); !strings.Contains(logs, "procedure=/switchyard.router.v1.RouterService/Release") || !strings.Contains(logs, "request_id=client-42") {
		t.Errorf("no rpc line with the request id in:\n%s", logs)
	}
	var caller, parent trace.SpanContext
	for _, s := range r.rec.Ended() {
		switch s.SpanKind() {
		case trace.SpanKindClient:
			caller = s.SpanContext()
		case trace.SpanKindServer:
			parent = s.Parent()
		}
		var tagged string
		for _, a := range s.Attributes() {
			if string(a.Key) == reqid.SpanAttribute {
				tagged = a.Value.AsString()
			}
		}
		if tagged != "client-42" {
			t.Errorf("%v span %q tagged %q, want client-42", s.SpanKind(), s.Name(), tagged)
		}
	}
	// One trace: the handler's span is a child of the caller's.
	if !caller.IsValid() || parent.SpanID() != caller.SpanID() || parent.TraceID() != caller.TraceID() {
		t.Errorf("the handler's span has parent %s/%s, want the caller's span %s/%s", parent.TraceID(), parent.SpanID(), caller.TraceID(), caller.SpanID())
	}
}

// A plain HTTP handler gets a server span that continues the caller's
// trace, named by the route, and its context carries it.
func TestHandleTraced(t *testing.T) {
	t.Parallel()
	inHandler := make(chan trace.SpanContext, 1)
	r := start(t, server.Config{}, func(s *server.Server) {
		s.Handle("/v1/", http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
			inHandler <- trace.SpanContextFromContext(r.Context())
		}))
	})
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, r.url+"/v1/models/org/name", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("traceparent", parent)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	sc := <-inHandler
	if got := sc.TraceID().String(); got != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("handler's trace %s, want the caller's", got)
	}
	var found bool
	for _, s := range r.rec.Ended() {
		if s.SpanKind() != trace.SpanKindServer || s.SpanContext().SpanID() != sc.SpanID() {
			continue
		}
		found = true
		if s.Name() != "POST /v1/" {
			t.Errorf("span named %q, want %q (the route, not the path)", s.Name(), "POST /v1/")
		}
		if got := s.Parent().SpanID().String(); got != "b7ad6b7169203331" {
			t.Errorf("span's parent %s, want the caller's span", got)
		}
	}
	if !found {
		t.Errorf("no server span for the request among %d spans", len(r.rec.Ended()))
	}
}
