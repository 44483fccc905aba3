package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"connectrpc.com/connect"
)

// loggingInterceptor logs every RPC's outcome: failures at Warn (Internal and
// Unknown at Error), successes at Debug.
type loggingInterceptor struct{ log *slog.Logger }

func (l loggingInterceptor) record(ctx context.Context, procedure string, start time.Time, err error) {
	level := slog.LevelDebug
	code := "ok"
	if err != nil {
		c := connect.CodeOf(err)
		code = c.String()
		level = slog.LevelWarn
		if c == connect.CodeInternal || c == connect.CodeUnknown {
			level = slog.LevelError
		}
		if c == connect.CodeCanceled {
			level = slog.LevelDebug
		}
	}
	l.log.Log(ctx, level, "rpc", "procedure", procedure, "code", code, "duration", time.Since(start), "err", err)
}

func (l loggingInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		start := time.Now()
		res, err := next(ctx, req)
		if !req.Spec().IsClient {
			l.record(ctx, req.Spec().Procedure, start, err)
		}
		return res, err
	}
}

func (l loggingInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (l loggingInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		err := next(ctx, conn)
		l.record(ctx, conn.Spec().Procedure, start, err)
		return err
	}
}

// deadlineInterceptor gives unary handlers a deadline when the caller set
// none, and caps any deadline at max, so a forgotten client timeout cannot
// pin a handler forever. Streams are left alone: a generation may be long,
// and it ends when the client goes away.
type deadlineInterceptor struct{ def, max time.Duration }

func (d deadlineInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		limit := d.def
		if dl, ok := ctx.Deadline(); ok {
			limit = min(time.Until(dl), d.max)
		}
		ctx, cancel := context.WithTimeout(ctx, limit)
		defer cancel()
		return next(ctx, req)
	}
}

func (d deadlineInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (d deadlineInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// recoverHandler turns a handler panic into an Internal error and logs the
// stack; the server keeps running.
func recoverHandler(log *slog.Logger) func(context.Context, connect.Spec, http.Header, any) error {
	return func(ctx context.Context, spec connect.Spec, _ http.Header, p any) error {
		log.ErrorContext(ctx, "handler panic", "procedure", spec.Procedure, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
		return connect.NewError(connect.CodeInternal, errors.New("internal error"))
	}
}
