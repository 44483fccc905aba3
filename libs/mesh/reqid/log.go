package reqid

import (
	"context"
	"log/slog"
)

// LogHandler wraps h so that every record logged with a context that
// carries an id (the slog ...Context methods, LogAttrs) gets the id as
// its request_id attribute: the request's lines need no logger threaded
// through, only its context.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ h slog.Handler }

func (l logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.h.Enabled(ctx, level)
}

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := From(ctx); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String(LogKey, id))
	}
	return l.h.Handle(ctx, r)
}

func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler { return logHandler{l.h.WithAttrs(as)} }
func (l logHandler) WithGroup(name string) slog.Handler    { return logHandler{l.h.WithGroup(name)} }
