package client_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	meshv1 "switchyard.dev/gen/switchyard/mesh/v1"
	"switchyard.dev/gen/switchyard/mesh/v1/meshv1connect"
	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/telemetry"
)

// A peer whose process dies mid-call resets the connection: the call is
// Unavailable (try another replica), not Canceled, which connect-go
// would say and which only the caller's own context may mean.
func TestResetConnectionIsUnavailable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Read(make([]byte, 4096)) // the request is on its way
			_ = c.(*net.TCPConn).SetLinger(0) // close with RST, as the kernel does for a killed process
			c.Close()
		}
	}()
	// A peer that answers, then exits mid-response.
	var cut *httptest.Server
	cut = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/proto")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte{0x0a, 0x10, 'x'}) // a GetInfoResponse promising 16 bytes, with 1
		w.(http.Flusher).Flush()
		cut.CloseClientConnections() // the process exits: its connections close
		<-r.Context().Done()
	}))
	cut.EnableHTTP2 = true
	cut.Config.Protocols = new(http.Protocols)
	cut.Config.Protocols.SetUnencryptedHTTP2(true)
	cut.Start()
	t.Cleanup(cut.Close)
	tel := &telemetry.Telemetry{Tracer: tracenoop.NewTracerProvider(), Meter: noop.NewMeterProvider(), Propagator: propagation.TraceContext{}}
	opts, err := client.Options(tel)
	if err != nil {
		t.Fatal(err)
	}
	c := meshv1connect.NewInfoServiceClient(client.NewHTTP(), "http://"+ln.Addr().String(), opts...)
	_, err = c.GetInfo(t.Context(), connect.NewRequest(&meshv1.GetInfoRequest{}))
	if got := connect.CodeOf(err); got != connect.CodeUnavailable {
		t.Fatalf("reset connection: code %v (%v), want unavailable", got, err)
	}
	c = meshv1connect.NewInfoServiceClient(client.NewHTTP(), cut.URL, opts...)
	_, err = c.GetInfo(t.Context(), connect.NewRequest(&meshv1.GetInfoRequest{}))
	if got := connect.CodeOf(err); got != connect.CodeUnavailable {
		t.Fatalf("response cut short: code %v (%v), want unavailable", got, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = c.GetInfo(ctx, connect.NewRequest(&meshv1.GetInfoRequest{}))
	if got := connect.CodeOf(err); got != connect.CodeCanceled {
		t.Fatalf("cancelled by the caller: code %v (%v), want canceled", got, err)
	}
}
