package client

import (
	"context"
	"errors"
	"io"

	"connectrpc.com/connect"
)

// peerGone re-codes as Unavailable a unary call that failed because its
// connection broke while the caller's context is still live. connect-go
// gives Canceled to a call whose connection was reset (ECONNRESET, EPIPE:
// it takes them for its own client going away) and Unknown to one whose
// response was cut short (unexpected EOF), so a peer killed mid-call looks
// like the caller gave up or a bug, and callers that move on to the next
// replica on Unavailable (the frontend's routers) would stop instead.
type peerGone struct{}

func (peerGone) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		if err != nil && req.Spec().IsClient && ctx.Err() == nil && broken(err) {
			return res, connect.NewError(connect.CodeUnavailable, err)
		}
		return res, err
	}
}

func broken(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeCanceled:
		return true
	case connect.CodeUnknown:
		return errors.Is(err, io.ErrUnexpectedEOF)
	}
	return false
}

func (peerGone) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (peerGone) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
