// Package client builds what a Switchyard service needs to call another:
// an HTTP client that speaks HTTP/2 without TLS (h2c), as every Switchyard
// server does, and the Connect client options every call carries (tracing
// and metrics). One constructor each, so every caller gets the same
// pooling, dead-peer detection and trace propagation.
package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"switchyard.dev/libs/mesh/telemetry"
)

// NewHTTP returns an h2c client. It has no overall timeout: streams are
// bounded by their contexts. HTTP/2 pings find a peer that vanished without
// closing its connection (a killed process on another machine), so a stream
// to it fails instead of hanging.
func NewHTTP() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols:           p,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: 15 * time.Second,
			PingTimeout:     10 * time.Second,
		},
	}}
}

// Options returns the Connect client options of an instance with telemetry
// tel: an otelconnect interceptor that records client spans and RPC metrics
// with tel's providers and propagates the trace context to the callee.
func Options(tel *telemetry.Telemetry) ([]connect.ClientOption, error) {
	if tel == nil {
		return nil, errors.New("client: nil telemetry")
	}
	otel, err := tel.ConnectInterceptor()
	if err != nil {
		return nil, fmt.Errorf("client: otel interceptor: %w", err)
	}
	return []connect.ClientOption{connect.WithInterceptors(otel)}, nil
}
