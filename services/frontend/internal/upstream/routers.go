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
	"switchyard.dev/libs/mesh/canary"
	"switchyard.dev/libs/mesh/discovery"
)

// ErrNoRouter means no router replica is known.
var ErrNoRouter = errors.New("upstream: no router available")

// Routed is a routing decision and the replica that made it; Release must
// go to the same replica, which holds the request's predicted load.
type Routed struct {
	Resp    *routerv1.RouteResponse
	Replica string
	// Version is the replica's build version, and Canary whether it is in
	// the routers' canary group (both from discovery; empty, false in
	// static mode).
	Version string
	Canary  bool
}

// Routers spreads Route calls over router replicas round-robin and fails
// over to the next replica when one is unavailable. With a canary split,
// a request first tries the replicas of its group (canary or baseline,
// by its affinity key), round-robin, and only then the others: the
// routers' canary takes its share of requests whatever the replica
// counts, and a group whose every replica is unavailable fails over.
//
// Calls read one immutable view, loaded once per call without a lock;
// discovery updates publish a new one.
type Routers struct {
	hc    connect.HTTPClient
	opts  []connect.ClientOption
	log   *slog.Logger
	next  atomic.Uint64
	split *canary.Split // nil: no canary split

	mu   sync.Mutex // serialises set
	view atomic.Pointer[routerView]
}

// routerView is the replicas to route to and a client of every replica ever
// known: a replica that has left discovery still gets the Release and
// PrefillDone of the requests it routed. Never modified once published.
type routerView struct {
	urls     []string
	ins      []discovery.Instance // by urls' index; zero in static mode
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
	r.set(urls, make([]discovery.Instance, len(urls)))
	return r
}

// SetSplit turns on the canary split of router replicas (call before
// Route is).
func (r *Routers) SetSplit(s *canary.Split) { r.split = s }

// set publishes a view routing to urls, whose instances are ins. Copying
// the replicas map costs little: replicas are few and change rarely.
func (r *Routers) set(urls []string, ins []discovery.Instance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	replicas := maps.Clone(r.view.Load().replicas)
	for _, u := range urls {
		if _, ok := replicas[u]; !ok {
			c := routerv1connect.NewRouterServiceClient(r.hc, u, r.opts...)
			replicas[u] = &replica{client: c, reporter: newReporter(c, u, r.log)}
		}
	}
	r.view.Store(&routerView{urls: slices.Clone(urls), ins: ins, replicas: replicas})
}

// Watch follows the healthy router instances in reg until ctx ends.
func (r *Routers) Watch(ctx context.Context, reg discovery.Registry) error {
	err := discovery.WatchRole(ctx, reg, r.log, discovery.RoleRouter, func(ins []discovery.Instance) {
		urls := make([]string, len(ins))
		for i, in := range ins {
			urls[i] = in.URL()
		}
		r.log.Debug("routers changed", "count", len(urls))
		r.set(urls, ins)
	})
	if err != nil {
		return fmt.Errorf("watch routers: %w", err)
	}
	return nil
}

// Route asks one replica after another, starting round-robin (within
// the request's canary group first), until one answers with anything but
// Unavailable.
func (r *Routers) Route(ctx context.Context, req *routerv1.RouteRequest) (Routed, error) {
	v := r.view.Load()
	urls := v.urls
	if len(urls) == 0 {
		return Routed{}, ErrNoRouter
	}
	order := r.order(v, req.GetAffinityKey())
	var last error
	for _, i := range order {
		url := urls[i]
		resp, err := v.replicas[url].client.Route(ctx, connect.NewRequest(req))
		if err == nil {
			return Routed{Resp: resp.Msg, Replica: url, Version: v.ins[i].Version, Canary: r.isCanary(v.ins[i])}, nil
		}
		last = err
		if connect.CodeOf(err) != connect.CodeUnavailable || ctx.Err() != nil {
			break
		}
		r.log.DebugContext(ctx, "router unavailable, trying next", "router", url, "err", err)
	}
	return Routed{}, fmt.Errorf("route: %w", last)
}

// order is the replicas to try for a request with key, by index: its
// group round-robin, then the rest round-robin.
func (r *Routers) order(v *routerView, key uint64) []int {
	n := len(v.urls)
	start := int(r.next.Add(1))
	out := make([]int, 0, n)
	if r.split == nil {
		for i := range n {
			out = append(out, (start+i)%n)
		}
		return out
	}
	group := r.split.Choose(discovery.RoleRouter, key, n, func(i int) bool { return r.isCanary(v.ins[i]) }, nil)
	for i := range group {
		out = append(out, group[(start+i)%len(group)])
	}
	if len(group) == n {
		return out
	}
	for i := range n {
		if j := (start + i) % n; !slices.Contains(group, j) {
			out = append(out, j)
		}
	}
	return out
}

func (r *Routers) isCanary(in discovery.Instance) bool {
	return r.split != nil && in.ID != "" && r.split.IsCanary(in)
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
