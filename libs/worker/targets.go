package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"

	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/nixl/metadata"
	"switchyard.dev/libs/worker/wire"
)

// MetaKVTransfer is the discovery metadata key under which a worker with
// a KV transfer agent publishes the agent's endpoint digest
// (metadata.Agent.Endpoints): its name, run and backend addresses.
const MetaKVTransfer = discovery.MetaKVTransfer

const (
	// targetRetain is how long a decode worker that left discovery is
	// still admitted: one shutting down leaves discovery first and then
	// serves on (-deregister-grace, then its drain), and its long prompts
	// should still be prefilled remotely.
	targetRetain = time.Minute
	// targetLookupEvery bounds the lookups in discovery for names the
	// watch does not know: each refused request would otherwise cost one
	// (an HTTP call with Consul), for anyone who can reach the worker.
	targetLookupEvery = time.Second
)

// targetGuard admits as remote prefill targets only decode workers listed
// in discovery, and only at the transfer endpoints they published there.
// A RemotePrefill request carries its target's metadata, addresses
// included, and comes from whoever can reach the prefill worker; without
// the guard it could make the worker connect to any address and write KV
// blocks there.
type targetGuard struct {
	reg discovery.Registry
	log *slog.Logger
	now func() time.Time

	mu         sync.Mutex
	known      map[string]target // decode instance ID → what it published
	lastLookup time.Time
	lastWarn   time.Time

	lookupMu sync.Mutex // one lookup at a time
}

type target struct {
	digest string
	seen   time.Time // last listed in discovery
}

// newTargetGuard watches the decode workers in reg until ctx ends.
func newTargetGuard(ctx context.Context, reg discovery.Registry, log *slog.Logger) (*targetGuard, error) {
	ch, err := reg.Watch(ctx, discovery.RoleDecode)
	if err != nil {
		return nil, fmt.Errorf("watching decode workers: %w", err)
	}
	g := &targetGuard{reg: reg, log: log, now: time.Now, known: map[string]target{}}
	go func() {
		for ins := range ch {
			g.update(ins)
		}
	}()
	return g, nil
}

// update records the decode workers listed now; those no longer listed
// are kept for targetRetain after they were last.
func (g *targetGuard) update(ins []discovery.Instance) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	listed := make(map[string]bool, len(ins))
	for _, in := range ins {
		listed[in.ID] = g.recordLocked(in, now)
	}
	for id, t := range g.known {
		if !listed[id] && now.Sub(t.seen) > targetRetain {
			delete(g.known, id)
		}
	}
}

// recordLocked records in's published endpoints, seen at now; it reports
// whether in published any. g.mu held.
func (g *targetGuard) recordLocked(in discovery.Instance, now time.Time) bool {
	d := in.Meta[MetaKVTransfer]
	if d != "" {
		g.known[in.ID] = target{digest: d, seen: now}
	}
	return d != ""
}

// admitted reports whether id is known with digest.
func (g *targetGuard) admitted(id, digest string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	t, ok := g.known[id]
	return ok && t.digest == digest
}

// check is disagg.ExportConfig.CheckTarget. A name the watch does not
// know (yet: a decode worker that has just registered) is looked up in
// discovery, at most once every targetLookupEvery, before it is refused.
// A lookup that fails is Unavailable (or the request's own context
// error), not a refusal.
func (g *targetGuard) check(ctx context.Context, md *metadata.Agent) error {
	want := md.Endpoints()
	if g.admitted(md.Name, want) {
		return nil
	}
	g.lookupMu.Lock()
	defer g.lookupMu.Unlock()
	if g.admitted(md.Name, want) { // a lookup just before ours found it
		return nil
	}
	g.mu.Lock()
	now := g.now()
	lookup := now.Sub(g.lastLookup) >= targetLookupEvery
	if lookup {
		g.lastLookup = now
	}
	g.mu.Unlock()
	if lookup {
		ins, err := g.reg.Instances(ctx, discovery.RoleDecode)
		if err != nil {
			if ctx.Err() != nil {
				return wire.ContextError(ctx, err)
			}
			return connect.NewError(connect.CodeUnavailable, fmt.Errorf("looking the target up in discovery: %w", err))
		}
		for _, in := range ins {
			if in.ID == md.Name {
				g.mu.Lock()
				g.recordLocked(in, g.now())
				g.mu.Unlock()
			}
		}
		if g.admitted(md.Name, want) {
			return nil
		}
	}
	g.warn(md.Name)
	return errNotATarget
}

var errNotATarget = errors.New("no decode worker in discovery published these transfer endpoints")

// warn logs a refusal, at most once a minute (the requests come from
// whoever can reach the worker).
func (g *targetGuard) warn(name string) {
	g.mu.Lock()
	now := g.now()
	quiet := now.Sub(g.lastWarn) < time.Minute
	if !quiet {
		g.lastWarn = now
	}
	g.mu.Unlock()
	if !quiet {
		g.log.Warn("remote prefill refused: the target is no decode worker in discovery at the endpoints it names (further refusals this minute are not logged)", "target", name)
	}
}
