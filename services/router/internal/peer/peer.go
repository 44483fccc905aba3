// Package peer shares predicted load between router replicas. Each
// replica pushes the load events of its own decisions (add, prefill done,
// free) in batches to every other router found in discovery, and applies
// the batches its peers push to it, so replicas that route one burst
// together see each other's decisions and do not herd onto one worker.
//
// Delivery is best effort: a batch that fails to reach a peer is dropped
// and logged, because predicted load is advisory and every entry expires
// by TTL anyway. A replica ignores batches tagged with its own id, so a
// router listed as its own peer (or a misrouted push) cannot echo.
package peer

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/gen/switchyard/router/v1/routerv1connect"
	"switchyard.dev/libs/mesh/discovery"
)

// Handler serves RouterPeerService.
type Handler struct {
	routerv1connect.UnimplementedRouterPeerServiceHandler
	Self string
	// Apply applies a peer's events and returns how many took effect.
	Apply func(origin string, events []*routerv1.LoadEvent) int
}

// PushLoadEvents implements RouterPeerService.
func (h *Handler) PushLoadEvents(_ context.Context, req *connect.Request[routerv1.PushLoadEventsRequest]) (*connect.Response[routerv1.PushLoadEventsResponse], error) {
	origin := req.Msg.GetOriginRouterId()
	if origin == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("origin_router_id is empty"))
	}
	res := &routerv1.PushLoadEventsResponse{}
	if origin != h.Self {
		res.Applied = uint32(h.Apply(origin, req.Msg.GetEvents()))
	}
	return connect.NewResponse(res), nil
}

// Pusher sends this router's load events to its peers.
type Pusher struct {
	self   string
	http   connect.HTTPClient
	log    *slog.Logger
	opts   []connect.ClientOption
	wake   chan struct{}
	mu     sync.Mutex
	queue  []*routerv1.LoadEvent
	peers  map[string]routerv1connect.RouterPeerServiceClient // by instance id
	failed map[string]int
}

// NewPusher returns a pusher for the router with instance id self.
func NewPusher(self string, hc connect.HTTPClient, log *slog.Logger, opts ...connect.ClientOption) *Pusher {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Pusher{self: self, http: hc, log: log, opts: opts, wake: make(chan struct{}, 1),
		peers: map[string]routerv1connect.RouterPeerServiceClient{}, failed: map[string]int{}}
}

// Publish queues an event for every peer; it never blocks.
func (p *Pusher) Publish(ev *routerv1.LoadEvent) {
	p.mu.Lock()
	p.queue = append(p.queue, ev)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// SetPeers replaces the peer set with the routers in ins other than self.
func (p *Pusher) SetPeers(ins []discovery.Instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := map[string]routerv1connect.RouterPeerServiceClient{}
	for _, in := range ins {
		if in.ID == p.self {
			continue
		}
		if c, ok := p.peers[in.ID]; ok {
			next[in.ID] = c
			continue
		}
		next[in.ID] = routerv1connect.NewRouterPeerServiceClient(p.http, in.URL(), p.opts...)
	}
	p.peers = next
}

// Watch keeps the peer set equal to the routers in reg until ctx ends.
func (p *Pusher) Watch(ctx context.Context, reg discovery.Registry) error {
	return discovery.WatchRole(ctx, reg, p.log, discovery.RoleRouter, p.SetPeers)
}

// Run pushes queued events until ctx ends: everything queued while a
// batch was in flight goes in the next batch.
func (p *Pusher) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		p.mu.Lock()
		batch, peers := p.queue, p.peers
		p.queue = nil
		p.mu.Unlock()
		if len(batch) == 0 || len(peers) == 0 {
			continue
		}
		p.push(ctx, batch, peers)
	}
}

func (p *Pusher) push(ctx context.Context, batch []*routerv1.LoadEvent, peers map[string]routerv1connect.RouterPeerServiceClient) {
	req := &routerv1.PushLoadEventsRequest{OriginRouterId: p.self, Events: batch}
	var wg sync.WaitGroup
	for id, c := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := c.PushLoadEvents(cctx, connect.NewRequest(req))
			p.noteResult(id, err)
		}()
	}
	wg.Wait()
}

func (p *Pusher) noteResult(id string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		delete(p.failed, id)
		return
	}
	p.failed[id]++
	if n := p.failed[id]; discovery.LogRetry(n) {
		p.log.Warn("pushing load events to peer router failed; dropped", "peer", id, "err", err, "failures", n)
	}
}
