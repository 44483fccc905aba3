package upstreamtest

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/gen/switchyard/router/v1/routerv1connect"
	"switchyard.dev/libs/mesh/reqid"
)

// Router is a fake RouterService: the i-th Route call of a model goes to
// that model's workers[i % len(workers)], or to hints.worker_id.
type Router struct {
	routerv1connect.UnimplementedRouterServiceHandler
	URL string

	mu       sync.Mutex
	workers  []*Worker
	calls    int
	routes   []*routerv1.RouteRequest
	releases []string
	prefills []string
	err      *connect.Error
	reports  int           // Report calls
	legacy   bool          // Report answers Unimplemented
	hold     chan struct{} // Report waits until it is closed
	held     int           // Report calls waiting on hold
	prefill  *routerv1.Worker
	source   *routerv1.Worker // prefix source named in every decision
	blocks   uint32
	decided  int64               // RouteResponse.decided_unix_nanos of the next decision, then one more each
	reqIDs   map[string][]string // X-Request-Id of each call, by method
}

// Name makes every decision also name a prefill worker and a prefix
// source holding blocks leading blocks (nil: none), as a router with
// prefill workers and prefix pull does.
func (r *Router) Name(prefill, source *routerv1.Worker, blocks uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prefill, r.source, r.blocks = prefill, source, blocks
}

// Decided stamps the next decision as made at unixNanos and each later
// one a nanosecond after the last (0: unstamped, as a router before 0.6).
func (r *Router) Decided(unixNanos int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decided = unixNanos
}

// StartRouter serves a fake router over workers until the test ends.
func StartRouter(tb testing.TB, workers ...*Worker) *Router {
	tb.Helper()
	r := &Router{workers: workers}
	r.URL = serve(tb, handler(routerv1connect.NewRouterServiceHandler(r)))
	return r
}

func handler(path string, h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(path, h)
	return mux
}

// FailWith makes every Route fail with err (nil restores).
func (r *Router) FailWith(err *connect.Error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// RequestIDs returns the X-Request-Id header of each call of method
// ("Route", "Report", "Release", "PrefillDone") so far ("" where it had
// none).
func (r *Router) RequestIDs(method string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reqIDs[method]...)
}

// noteID records the X-Request-Id of a call of method; r.mu is held.
func (r *Router) noteID(method string, h http.Header) {
	if r.reqIDs == nil {
		r.reqIDs = map[string][]string{}
	}
	r.reqIDs[method] = append(r.reqIDs[method], h.Get(reqid.Header))
}

// Routes returns the Route requests received.
func (r *Router) Routes() []*routerv1.RouteRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*routerv1.RouteRequest(nil), r.routes...)
}

// Releases returns the released request ids.
func (r *Router) Releases() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.releases...)
}

// Route implements the RouterService.
func (r *Router) Route(_ context.Context, req *connect.Request[routerv1.RouteRequest]) (*connect.Response[routerv1.RouteResponse], error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routes = append(r.routes, req.Msg)
	r.noteID("Route", req.Header())
	if r.err != nil {
		return nil, r.err
	}
	var pool []*Worker
	for _, w := range r.workers {
		if w.cfg.Model == req.Msg.GetModel() {
			if id := req.Msg.GetHints().GetWorkerId(); id != "" && id == w.cfg.ID {
				return connect.NewResponse(&routerv1.RouteResponse{Decode: &routerv1.Worker{InstanceId: w.cfg.ID, Address: w.URL}, Mode: "direct"}), nil
			}
			pool = append(pool, w)
		}
	}
	if len(pool) == 0 {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no worker serves model "+req.Msg.GetModel()))
	}
	w := pool[r.calls%len(pool)]
	r.calls++
	decided := r.decided
	if r.decided != 0 {
		r.decided++
	}
	return connect.NewResponse(&routerv1.RouteResponse{Decode: &routerv1.Worker{InstanceId: w.cfg.ID, Address: w.URL}, Mode: "round-robin",
		Prefill: r.prefill, PrefixSource: r.source, PrefixSourceBlocks: r.blocks, DecidedUnixNanos: decided}), nil
}

// Release implements the RouterService.
func (r *Router) Release(_ context.Context, req *connect.Request[routerv1.ReleaseRequest]) (*connect.Response[routerv1.ReleaseResponse], error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.releases = append(r.releases, req.Msg.GetRequestId())
	r.noteID("Release", req.Header())
	return connect.NewResponse(&routerv1.ReleaseResponse{}), nil
}

// PrefillDones returns the request ids reported prefilled.
func (r *Router) PrefillDones() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.prefills...)
}

// PrefillDone implements the RouterService.
func (r *Router) PrefillDone(_ context.Context, req *connect.Request[routerv1.PrefillDoneRequest]) (*connect.Response[routerv1.PrefillDoneResponse], error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prefills = append(r.prefills, req.Msg.GetRequestId())
	r.noteID("PrefillDone", req.Header())
	return connect.NewResponse(&routerv1.PrefillDoneResponse{}), nil
}

// Report implements the RouterService, recording ids as PrefillDone and
// Release do.
func (r *Router) Report(ctx context.Context, req *connect.Request[routerv1.ReportRequest]) (*connect.Response[routerv1.ReportResponse], error) {
	r.mu.Lock()
	legacy, hold := r.legacy, r.hold
	r.mu.Unlock()
	if legacy {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("switchyard.router.v1.RouterService.Report is not implemented"))
	}
	if hold != nil {
		r.mu.Lock()
		r.held++
		r.mu.Unlock()
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reports++
	r.noteID("Report", req.Header())
	r.prefills = append(r.prefills, req.Msg.GetPrefillDoneRequestIds()...)
	r.releases = append(r.releases, req.Msg.GetReleasedRequestIds()...)
	return connect.NewResponse(&routerv1.ReportResponse{}), nil
}

// Reports counts the Report calls answered.
func (r *Router) Reports() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reports
}

// WithoutReport makes Report answer Unimplemented, as a router older than
// Report does.
func (r *Router) WithoutReport() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.legacy = true
}

// Held counts the Report calls that waited on HoldReports so far.
func (r *Router) Held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held
}

// HoldReports makes Report calls wait until release is called.
func (r *Router) HoldReports() (release func()) {
	ch := make(chan struct{})
	r.mu.Lock()
	r.hold = ch
	r.mu.Unlock()
	return sync.OnceFunc(func() {
		r.mu.Lock()
		r.hold = nil
		r.mu.Unlock()
		close(ch)
	})
}
