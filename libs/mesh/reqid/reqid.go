// Package reqid carries one client request's identity through the mesh:
// the frontend takes it from the client's X-Request-Id header (or makes
// one), echoes it, and every hop after it (router, decode worker, prefill
// worker, prefix source) receives it as the same header of its Connect
// call, keeps it in the context, logs it as request_id and puts it on its
// spans, so one grep or one trace query finds everything a request did.
//
// The id names the client's request, and a client may reuse one: it is
// for correlation only, never a key. The request_id fields of the router
// and worker messages are a different thing, the frontend's unique name
// of one generation attempt (a choice of a request with n > 1, or a
// migration, gets its own), which the router keys its load bookkeeping
// by; logs name that one generation_id. A server given no header falls
// back to a unary message's request_id field, so calls from peers that
// predate the header still correlate.
package reqid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Header is the HTTP and Connect header that carries the id.
const Header = "X-Request-Id"

// MaxLen is the longest id accepted from a caller, in bytes.
const MaxLen = 128

// LogKey is the slog attribute of the id (LogHandler).
const LogKey = "request_id"

// SpanAttribute is the span attribute of the id (Tag).
const SpanAttribute = "switchyard.request_id"

type ctxKey struct{}

// With returns ctx carrying id.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// From returns the id ctx carries, "" if none.
func From(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// New returns a fresh id: 16 random bytes in hex.
func New() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// Valid reports whether id may be taken from a caller as it is: 1 to
// MaxLen bytes of printable ASCII (space to tilde), without a leading or
// trailing space, which HTTP would not carry. Anything else (control
// bytes, non-ASCII, an empty or overlong value) is replaced, not refused:
// a bad id must not fail a request.
func Valid(id string) bool {
	if id == "" || len(id) > MaxLen || id[0] == ' ' || id[len(id)-1] == ' ' {
		return false
	}
	for i := range len(id) {
		if c := id[i]; c < ' ' || c > '~' {
			return false
		}
	}
	return true
}

// OrNew returns id if it is Valid, else a New one.
func OrNew(id string) string {
	if Valid(id) {
		return id
	}
	return New()
}

// Tag puts id on the span ctx carries (nothing if none records).
func Tag(ctx context.Context, id string) {
	trace.SpanFromContext(ctx).SetAttributes(attribute.String(SpanAttribute, id))
}

// Handler gives every request to next an id: the one a handler outside
// already gave it, else the caller's X-Request-Id if Valid, else a new one.
// The id is in the request's context, tagged on its span (a tracing
// handler must wrap this one for that), and in the response's
// X-Request-Id header, set before next runs so that every answer carries
// it: errors, and streams whose headers go out with their first event.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := From(r.Context())
		if id == "" {
			id = OrNew(r.Header.Get(Header))
			r = r.WithContext(With(r.Context(), id))
		}
		w.Header().Set(Header, id)
		Tag(r.Context(), id)
		next.ServeHTTP(w, r)
	})
}
