package upstream

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/gen/switchyard/router/v1/routerv1connect"
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
type reporter struct {
	client routerv1connect.RouterServiceClient
	url    string
	log    *slog.Logger

	mu       sync.Mutex
	done     []string // prefill-done ids for the next Report
	released []string // released ids for the next Report
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

// add queues a report and starts a sender if none runs.
func (rep *reporter) add(prefillDone bool, id string) {
	rep.mu.Lock()
	if prefillDone {
		rep.done = append(rep.done, id)
	} else {
		rep.released = append(rep.released, id)
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
func (rep *reporter) deliver(done, released []string) {
	for !rep.legacy && len(done)+len(released) > 0 {
		d := done[:min(len(done), maxReportIDs)]
		r := released[:min(len(released), maxReportIDs-len(d))]
		err := withTimeout(func(ctx context.Context) error {
			_, err := rep.client.Report(ctx, connect.NewRequest(&routerv1.ReportRequest{PrefillDoneRequestIds: d, ReleasedRequestIds: r}))
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
		kind string
		ids  []string
		call func(context.Context, string) error
	}{{"prefill-done", done, prefillDone}, {"release", released, release}} {
		for _, id := range batch.ids {
			rest--
			err := withTimeout(func(ctx context.Context) error { return batch.call(ctx, id) })
			if rep.dropRest(err, batch.kind, id, rest) {
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
		rep.log.Debug(kind+" report failed", "router", rep.url, "request_id", id, "err", err)
		return false
	}
	rep.log.Debug(kind+" report failed; dropping the rest of the batch", "router", rep.url, "request_id", id, "err", err, "dropped", rest)
	return true
}

// withTimeout runs one report call under its own reportTimeout.
func withTimeout(call func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
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
