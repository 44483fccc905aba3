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
	"switchyard.dev/libs/mesh/backoff"
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

// maxQueued bounds the events waiting for one peer: one unreachable (or
// slow) peer must not grow memory, and load this stale is expired by its
// TTL anyway. The oldest go first.
const maxQueued = 1 << 14

// pushTimeout bounds one push to one peer (Pusher.timeout).
const pushTimeout = time.Second

// Pusher sends this router's load events to its peers. Each peer has its
// own queue and at most one push in flight, so a slow or unreachable peer
// delays only its own events.
type Pusher struct {
	self string
	http connect.HTTPClient
	log  *slog.Logger
	opts []connect.ClientOption
	wake chan struct{}

	timeout time.Duration // pushTimeout; tests lengthen it

	mu    sync.Mutex
	peers map[string]*peerState // by instance id
}

type peerState struct {
	client  routerv1connect.RouterPeerServiceClient
	queue   []*routerv1.LoadEvent
	busy    bool // a push is in flight
	failed  int  // consecutive failures
	dropped int  // events dropped from a full queue since the last log
}

// NewPusher returns a pusher for the router with instance id self.
func NewPusher(self string, hc connect.HTTPClient, log *slog.Logger, opts ...connect.ClientOption) *Pusher {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Pusher{self: self, http: hc, log: log, opts: opts, wake: make(chan struct{}, 1), timeout: pushTimeout, peers: map[string]*peerState{}}
}

// Publish queues an event for every peer; it never blocks.
func (p *Pusher) Publish(ev *routerv1.LoadEvent) {
	p.mu.Lock()
	for _, ps := range p.peers {
		if len(ps.queue) >= maxQueued {
			ps.queue = ps.queue[1:]
			ps.dropped++
		}
		ps.queue = append(ps.queue, ev)
	}
	p.mu.Unlock()
	p.poke()
}

func (p *Pusher) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// SetPeers replaces the peer set with the routers in ins other than self.
// A peer that stays keeps its queue.
func (p *Pusher) SetPeers(ins []discovery.Instance) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := map[string]*peerState{}
	for _, in := range ins {
		if in.ID == p.self {
			continue
		}
		if ps, ok := p.peers[in.ID]; ok {
			next[in.ID] = ps
			continue
		}
		next[in.ID] = &peerState{client: routerv1connect.NewRouterPeerServiceClient(p.http, in.URL(), p.opts...)}
	}
	p.peers = next
}

// Watch keeps the peer set equal to the routers in reg until ctx ends.
func (p *Pusher) Watch(ctx context.Context, reg discovery.Registry) error {
	return discovery.WatchRole(ctx, reg, p.log, discovery.RoleRouter, p.SetPeers)
}

// Run pushes queued events until ctx ends: to each peer without a push in
// flight, everything queued for it, in one batch.
func (p *Pusher) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		}
		p.mu.Lock()
		for id, ps := range p.peers {
			if ps.busy || len(ps.queue) == 0 {
				continue
			}
			batch := ps.queue
			ps.queue, ps.busy = nil, true
			wg.Go(func() { p.push(ctx, id, ps, batch) })
		}
		p.mu.Unlock()
	}
}

// push sends one batch to one peer, then lets Run send what queued meanwhile.
func (p *Pusher) push(ctx context.Context, id string, ps *peerState, batch []*routerv1.LoadEvent) {
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	_, err := ps.client.PushLoadEvents(cctx, connect.NewRequest(&routerv1.PushLoadEventsRequest{OriginRouterId: p.self, Events: batch}))
	cancel()
	p.mu.Lock()
	ps.busy = false
	more := len(ps.queue) > 0
	dropped := ps.dropped
	ps.dropped = 0
	if err == nil {
		ps.failed = 0
	} else {
		ps.failed++
	}
	failed := ps.failed
	p.mu.Unlock()
	if err != nil && backoff.LogWorthy(failed) {
		p.log.Warn("pushing load events to peer router failed; dropped", "peer", id, "err", err, "failures", failed, "events", len(batch))
	}
	if dropped > 0 {
		p.log.Warn("peer router's load event queue was full; dropped the oldest", "peer", id, "dropped", dropped)
	}
	if more {
		p.poke()
	}
}
