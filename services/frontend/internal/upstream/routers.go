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
	urls    []string
	clients map[string]routerv1connect.RouterServiceClient
}

// NewRouters returns a pool over the given base URLs (static mode); call
// Watch to follow discovery instead.
func NewRouters(hc connect.HTTPClient, log *slog.Logger, urls []string, opts ...connect.ClientOption) *Routers {
	r := &Routers{hc: hc, opts: opts, log: log}
	r.view.Store(&routerView{clients: map[string]routerv1connect.RouterServiceClient{}})
	r.set(urls)
	return r
}

// set publishes a view routing to urls. Copying the clients map costs
// little: replicas are few and change rarely.
func (r *Routers) set(urls []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	clients := maps.Clone(r.view.Load().clients)
	for _, u := range urls {
		if _, ok := clients[u]; !ok {
			clients[u] = routerv1connect.NewRouterServiceClient(r.hc, u, r.opts...)
		}
	}
	r.view.Store(&routerView{urls: slices.Clone(urls), clients: clients})
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
		resp, err := v.clients[url].Route(ctx, connect.NewRequest(req))
		if err == nil {
			return Routed{Resp: resp.Msg, Replica: url}, nil
		}
		last = err
		if connect.CodeOf(err) != connect.CodeUnavailable || ctx.Err() != nil {
			break
		}
		r.log.Debug("router unavailable, trying next", "router", url, "err", err)
	}
	return Routed{}, fmt.Errorf("route: %w", last)
}

// Release tells the replica that routed id that the request ended.
// PrefillDone tells it that the request produced its first token. Errors
// are logged, not returned: the router also expires load on its own.
func (r *Routers) Release(ctx context.Context, replica, id string) {
	r.tell(replica, id, "release", func(c routerv1connect.RouterServiceClient) error {
		_, err := c.Release(ctx, connect.NewRequest(&routerv1.ReleaseRequest{RequestId: id}))
		return err
	})
}

// PrefillDone: see Release.
func (r *Routers) PrefillDone(ctx context.Context, replica, id string) {
	r.tell(replica, id, "prefill-done report", func(c routerv1connect.RouterServiceClient) error {
		_, err := c.PrefillDone(ctx, connect.NewRequest(&routerv1.PrefillDoneRequest{RequestId: id}))
		return err
	})
}

// tell calls the replica that routed id, logging a failure.
func (r *Routers) tell(replica, id, what string, call func(routerv1connect.RouterServiceClient) error) {
	c := r.view.Load().clients[replica]
	if c == nil {
		return
	}
	if err := call(c); err != nil {
		r.log.Debug(what+" failed", "router", replica, "request_id", id, "err", err)
	}
}
