package upstream

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.opentelemetry.io/otel/trace"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/gen/switchyard/router/v1/routerv1connect"
	"switchyard.dev/libs/mesh/reqid"
)

// reportTimeout bounds each call: one Report, or against an old router
// one single PrefillDone or Release (a backlog of single calls does not
// share one deadline; after one times out, the rest of its batch is
// dropped, see dropRest).
const reportTimeout = 2 * time.Second

// maxReportIDs is the most ids one Report carries (router.proto).
const maxReportIDs = 1 << 16

// reporter sends one replica the PrefillDone and Release reports of the
// requests it routed. A report goes at once when none is in flight;
// otherwise it joins the next Report, sent as soon as the one in flight
// returns. A lone request waits for nothing, and under load the replica
// gets one call per round trip instead of two per request. Reports keep
// their order: a request's prefill-done is never sent after its release.
//
// A call about one client request alone (the reports of its choices and
// attempts, the lone request's case) carries that request's id and is part
// of its trace; a batch that mixes requests belongs to none, and goes as
// background work.
type reporter struct {
	client routerv1connect.RouterServiceClient
	url    string
	log    *slog.Logger

	mu       sync.Mutex
	done     []report // prefill-done reports for the next Report
	released []report // released reports for the next Report
	sending  bool
	idle     chan struct{} // closed when sending ends

	// legacy: the replica has no Report, so single calls. Only the sender
	// goroutine uses it; senders follow one another through mu.
	legacy bool
}

func newReporter(client routerv1connect.RouterServiceClient, url string, log *slog.Logger) *reporter {
	idle := make(chan struct{})
	close(idle)
	return &reporter{client: client, url: url, log: log, idle: idle}
}

// report is one queued report: the generation id the router knows, and
// the client request it is about.
type report struct {
	id   string
	from origin
}

// origin is what a report keeps of its request's context: the request id
// and the span of the call that made it, and nothing that would cancel it.
type origin struct {
	reqID string
	span  trace.SpanContext
}

func originOf(ctx context.Context) origin {
	return origin{reqID: reqid.From(ctx), span: trace.SpanContextFromContext(ctx)}
}

// context is a background context carrying o: calls made with it send o's
// request id, and their spans are children of o's span.
func (o origin) context() context.Context {
	ctx := context.Background()
	if o.reqID != "" {
		ctx = reqid.With(ctx, o.reqID)
	}
	if o.span.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, o.span)
	}
	return ctx
}

// common is the origin every report of the batches shares, if they are
// all about one client request; the zero origin otherwise.
func common(batches ...[]report) origin {
	var o origin
	first := true
	for _, b := range batches {
		for _, r := range b {
			switch {
			case first:
				o, first = r.from, false
			case r.from.reqID != o.reqID || r.from.span.TraceID() != o.span.TraceID():
				return origin{}
			}
		}
	}
	if o.reqID == "" {
		return origin{}
	}
	return o
}

func ids(rs []report) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.id
	}
	return out
}

// add queues a report and starts a sender if none runs.
func (rep *reporter) add(prefillDone bool, r report) {
	rep.mu.Lock()
	if prefillDone {
		rep.done = append(rep.done, r)
	} else {
		rep.released = append(rep.released, r)
	}
	if rep.sending {
		rep.mu.Unlock()
		return
	}
	rep.sending, rep.idle = true, make(chan struct{})
	rep.mu.Unlock()
	go rep.send()
}

// send delivers batches until none is left.
func (rep *reporter) send() {
	for {
		rep.mu.Lock()
		done, released := rep.done, rep.released
		rep.done, rep.released = nil, nil
		if len(done)+len(released) == 0 {
			rep.sending = false
			close(rep.idle)
			rep.mu.Unlock()
			return
		}
		rep.mu.Unlock()
		rep.deliver(done, released)
	}
}

// deliver sends one batch, prefill-done ids first, in Reports of at most
// maxReportIDs ids, or as single calls to a replica without Report.
// Failures are logged, not retried: the router also expires load on its
// own.
func (rep *reporter) deliver(done, released []report) {
	for !rep.legacy && len(done)+len(released) > 0 {
		d := done[:min(len(done), maxReportIDs)]
		r := released[:min(len(released), maxReportIDs-len(d))]
		err := withTimeout(common(d, r), func(ctx context.Context) error {
			_, err := rep.client.Report(ctx, connect.NewRequest(&routerv1.ReportRequest{PrefillDoneRequestIds: ids(d), ReleasedRequestIds: ids(r)}))
			return err
		})
		if connect.CodeOf(err) == connect.CodeUnimplemented {
			rep.log.Info("router replica has no Report; sending single reports", "router", rep.url)
			rep.legacy = true
			break
		}
		if err != nil {
			rep.log.Debug("report failed", "router", rep.url, "prefill_done", len(d), "released", len(r), "err", err)
		}
		done, released = done[len(d):], released[len(r):]
	}
	prefillDone := func(ctx context.Context, id string) error {
		_, err := rep.client.PrefillDone(ctx, connect.NewRequest(&routerv1.PrefillDoneRequest{RequestId: id}))
		return err
	}
	release := func(ctx context.Context, id string) error {
		_, err := rep.client.Release(ctx, connect.NewRequest(&routerv1.ReleaseRequest{RequestId: id}))
		return err
	}
	rest := len(done) + len(released)
	for _, batch := range []struct {
		kind    string
		reports []report
		call    func(context.Context, string) error
	}{{"prefill-done", done, prefillDone}, {"release", released, release}} {
		for _, r := range batch.reports {
			rest--
			err := withTimeout(r.from, func(ctx context.Context) error { return batch.call(ctx, r.id) })
			if rep.dropRest(err, batch.kind, r.id, rest) {
				return
			}
		}
	}
}

// dropRest logs a failed single report and says whether to drop the rest
// of the batch: after a call that timed out or found the replica
// unavailable, the others would wait as long each (a backlog of n would
// take n timeouts), and the router expires load it is not told about.
func (rep *reporter) dropRest(err error, kind, id string, rest int) bool {
	if err == nil {
		return false
	}
	code := connect.CodeOf(err)
	if rest == 0 || code != connect.CodeDeadlineExceeded && code != connect.CodeUnavailable {
		rep.log.Debug(kind+" report failed", "router", rep.url, "generation_id", id, "err", err)
		return false
	}
	rep.log.Debug(kind+" report failed; dropping the rest of the batch", "router", rep.url, "generation_id", id, "err", err, "dropped", rest)
	return true
}

// withTimeout runs one report call under its own reportTimeout, on
// behalf of o (zero: no request).
func withTimeout(o origin, call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(o.context(), reportTimeout)
	defer cancel()
	return call(ctx)
}

// flush waits until every queued report was sent (or failed), or ctx ends.
func (rep *reporter) flush(ctx context.Context) error {
	rep.mu.Lock()
	idle := rep.idle
	rep.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
