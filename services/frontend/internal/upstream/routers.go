package upstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/gen/switchyard/router/v1/routerv1connect"
	"switchyard.dev/libs/mesh/discovery"
)

// ErrNoRouter means no router replica is known.
var ErrNoRouter = errors.New("upstream: no router available")

// Routed is a routing decision and the replica that made it; Release must
// go to the same replica, which holds the request's predicted load.
type Routed struct {
	Resp    *routerv1.RouteResponse
	Replica string
}

// Routers spreads Route calls over router replicas round-robin and fails
// over to the next replica when one is unavailable.
//
// Calls read one immutable view, loaded once per call without a lock;
// discovery updates publish a new one.
type Routers struct {
	hc   connect.HTTPClient
	opts []connect.ClientOption
	log  *slog.Logger
	next atomic.Uint64

	mu   sync.Mutex // serialises set
	view atomic.Pointer[routerView]
}

// routerView is the replicas to route to and a client of every replica ever
// known: a replica that has left discovery still gets the Release and
// PrefillDone of the requests it routed. Never modified once published.
type routerView struct {
	urls     []string
	replicas map[string]*replica
}

// replica is one router replica's client and the reporter of the requests
// it routed; shared by every view that knows the replica.
type replica struct {
	client   routerv1connect.RouterServiceClient
	reporter *reporter
}

// NewRouters returns a pool over the given base URLs (static mode); call
// Watch to follow discovery instead.
func NewRouters(hc connect.HTTPClient, log *slog.Logger, urls []string, opts ...connect.ClientOption) *Routers {
	r := &Routers{hc: hc, opts: opts, log: log}
	r.view.Store(&routerView{replicas: map[string]*replica{}})
	r.set(urls)
	return r
}

// set publishes a view routing to urls. Copying the replicas map costs
// little: replicas are few and change rarely.
func (r *Routers) set(urls []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	replicas := maps.Clone(r.view.Load().replicas)
	for _, u := range urls {
		if _, ok := replicas[u]; !ok {
			c := routerv1connect.NewRouterServiceClient(r.hc, u, r.opts...)
			replicas[u] = &replica{client: c, reporter: newReporter(c, u, r.log)}
		}
	}
	r.view.Store(&routerView{urls: slices.Clone(urls), replicas: replicas})
}

// Watch follows the healthy router instances in reg until ctx ends.
func (r *Routers) Watch(ctx context.Context, reg discovery.Registry) error {
	err := discovery.WatchRole(ctx, reg, r.log, discovery.RoleRouter, func(ins []discovery.Instance) {
		urls := make([]string, len(ins))
		for i, in := range ins {
			urls[i] = in.URL()
		}
		r.log.Debug("routers changed", "count", len(urls))
		r.set(urls)
	})
	if err != nil {
		return fmt.Errorf("watch routers: %w", err)
	}
	return nil
}

// Route asks one replica after another, starting round-robin, until one
// answers with anything but Unavailable.
func (r *Routers) Route(ctx context.Context, req *routerv1.RouteRequest) (Routed, error) {
	v := r.view.Load()
	urls := v.urls
	if len(urls) == 0 {
		return Routed{}, ErrNoRouter
	}
	start := int(r.next.Add(1))
	var last error
	for i := range urls {
		url := urls[(start+i)%len(urls)]
		resp, err := v.replicas[url].client.Route(ctx, connect.NewRequest(req))
		if err == nil {
			return Routed{Resp: resp.Msg, Replica: url}, nil
		}
		last = err
		if connect.CodeOf(err) != connect.CodeUnavailable || ctx.Err() != nil {
			break
		}
		r.log.DebugContext(ctx, "router unavailable, trying next", "router", url, "err", err)
	}
	return Routed{}, fmt.Errorf("route: %w", last)
}

// Release tells the replica that routed id that the request ended, and
// PrefillDone that it produced its first token. Both return at once: the
// reports go in the background, batched per replica (see reporter), and a
// failure is logged, not returned, since the router also expires load on
// its own. A replica never known is not told. ctx is the request's: the
// report carries its request id and joins its trace (see reporter), but
// is sent whether or not ctx has ended.
func (r *Routers) Release(ctx context.Context, replica, id string) { r.report(ctx, replica, false, id) }

// PrefillDone tells replica that request id finished its remote prefill; see Release.
func (r *Routers) PrefillDone(ctx context.Context, replica, id string) {
	r.report(ctx, replica, true, id)
}

func (r *Routers) report(ctx context.Context, url string, prefillDone bool, id string) {
	if rp := r.view.Load().replicas[url]; rp != nil {
		rp.reporter.add(prefillDone, report{id: id, from: originOf(ctx)})
	}
}

// Flush waits until the reports queued so far were sent, or ctx ends: on
// shutdown, and in tests.
func (r *Routers) Flush(ctx context.Context) error {
	for _, rp := range r.view.Load().replicas {
		if err := rp.reporter.flush(ctx); err != nil {
			return err
		}
	}
	return nil
}
