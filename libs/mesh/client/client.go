// Package client builds what a Switchyard service needs to call another:
// an HTTP client that speaks HTTP/2 without TLS (h2c) to http:// peers
// and, given a TLS dialer, HTTP/2 over mutual TLS to https:// ones (a peer
// that publishes discovery.MetaTLS), and the Connect client options every call carries (tracing
// and metrics, the request id, a unary deadline, message size limits). One constructor each, so every caller gets the same
// pooling, dead-peer detection and trace propagation.
package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"connectrpc.com/connect"

	"switchyard.dev/libs/mesh/reqid"
	"switchyard.dev/libs/mesh/rpclimit"
	"switchyard.dev/libs/mesh/telemetry"
)

// NewHTTP returns an h2c client. It has no overall timeout: streams are
// bounded by their contexts. HTTP/2 pings find a peer that vanished without
// closing its connection (a killed process on another machine), so a stream
// to it fails instead of hanging.
func NewHTTP() *http.Client { return NewHTTPTLS(nil) }

// DialTLSFunc dials and completes a TLS handshake, as
// tlsconf.Reloader.DialTLS does with the instance's current certificate.
type DialTLSFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// NewHTTPTLS is NewHTTP that reaches https:// peers through dialTLS
// (HTTP/2 negotiated by ALPN): each new connection is made by it, so it
// decides the certificate presented and the CA trusted at that moment.
// With a nil dialTLS it is NewHTTP: h2c only.
func NewHTTPTLS(dialTLS DialTLSFunc) *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	if dialTLS != nil {
		p.SetHTTP2(true)
	}
	return &http.Client{Transport: &http.Transport{
		DialTLSContext:      dialTLS,
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
// tel and the default limits: OptionsWith(tel, rpclimit.Limits{}).
func Options(tel *telemetry.Telemetry) ([]connect.ClientOption, error) {
	return OptionsWith(tel, rpclimit.Limits{})
}

// OptionsWith returns the Connect client options of an instance with
// telemetry tel: an otelconnect interceptor that records client spans and
// RPC metrics with tel's providers and propagates the trace context to the
// callee; the request id of the call's context sent along (package
// reqid); a deadline for unary calls whose context has none; and l's
// bound on every message sent and received (package rpclimit; zero
// fields are the defaults).
func OptionsWith(tel *telemetry.Telemetry, l rpclimit.Limits) ([]connect.ClientOption, error) {
	if tel == nil {
		return nil, errors.New("client: nil telemetry")
	}
	otel, err := tel.ConnectInterceptor()
	if err != nil {
		return nil, fmt.Errorf("client: otel interceptor: %w", err)
	}
	l = l.WithDefaults()
	return []connect.ClientOption{
		connect.WithInterceptors(peerGone{}, otel, reqid.NewInterceptor(), unaryDeadline{l.UnaryTimeout}),
		connect.WithReadMaxBytes(l.MaxMessageBytes),
		connect.WithSendMaxBytes(l.MaxMessageBytes),
	}, nil
}

// unaryDeadline gives a unary call whose context has no deadline one of
// d, so a peer that accepted the call and never answers cannot hold the
// caller forever. Streams are left alone (package rpclimit).
type unaryDeadline struct{ d time.Duration }

func (u unaryDeadline) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if _, ok := ctx.Deadline(); ok || !req.Spec().IsClient {
			return next(ctx, req)
		}
		ctx, cancel := context.WithTimeout(ctx, u.d)
		defer cancel()
		return next(ctx, req)
	}
}

func (unaryDeadline) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (unaryDeadline) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
