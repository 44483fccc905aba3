package reqid

import (
	"context"
	"errors"

	"connectrpc.com/connect"
)

// Interceptor carries the id over Connect calls. On a client it sends the
// id of the call's context as the X-Request-Id header (a call whose
// context has none, background work, sends none; a header the caller set
// wins). On a handler it puts the caller's id in the context (the
// header, else a unary message's request_id field, else a new id) and
// answers with it in the response header. Both ends tag the call's span,
// so it goes after the tracing interceptor in a chain.
type Interceptor struct{}

// NewInterceptor returns the interceptor.
func NewInterceptor() Interceptor { return Interceptor{} }

// requestIDer is a message with a request_id field.
type requestIDer interface{ GetRequestId() string }

// WrapUnary carries the id of a unary call: from the context into the
// request header on a client, from the header (or the message) into the
// context on a handler.
func (Interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			if id := From(ctx); id != "" {
				if req.Header().Get(Header) == "" {
					req.Header().Set(Header, id)
				}
				Tag(ctx, req.Header().Get(Header))
			}
			return next(ctx, req)
		}
		id := req.Header().Get(Header)
		if !Valid(id) {
			if m, ok := req.Any().(requestIDer); ok {
				id = m.GetRequestId()
			}
		}
		id = OrNew(id)
		ctx = With(ctx, id)
		Tag(ctx, id)
		res, err := next(ctx, req)
		var ce *connect.Error
		switch {
		case err == nil && res != nil:
			res.Header().Set(Header, id)
		case errors.As(err, &ce):
			ce.Meta().Set(Header, id)
		}
		return res, err
	}
}

// WrapStreamingClient sends the context's id with a stream the client opens.
func (Interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		if id := From(ctx); id != "" {
			if conn.RequestHeader().Get(Header) == "" {
				conn.RequestHeader().Set(Header, id)
			}
			Tag(ctx, conn.RequestHeader().Get(Header))
		}
		return conn
	}
}

// WrapStreamingHandler puts a stream's id into the handler's context.
func (Interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		id := OrNew(conn.RequestHeader().Get(Header))
		ctx = With(ctx, id)
		Tag(ctx, id)
		conn.ResponseHeader().Set(Header, id)
		return next(ctx, conn)
	}
}
