package consuldisc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"switchyard.dev/libs/mesh/backoff"
	"switchyard.dev/libs/mesh/discovery"
)

// registration is the reconcile loop's state for one instance.
//
// Every call to the agent holds opMu, so they never overlap: a heartbeat
// that fails and re-registers cannot land after Deregister (which waits
// for it, then finds the registration gone), and a re-registration always
// sends the status wanted when it is made, not one read before a
// concurrent SetHealth.
type registration struct {
	r       *Registry
	svc     *api.AgentServiceRegistration // sent only under opMu
	checkID string
	cancel  context.CancelFunc

	opMu sync.Mutex // held across each call to the agent

	mu     sync.Mutex
	status string // desired check status
	gone   bool
}

func (g *registration) state() (status string, gone bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.status, g.gone
}

// holder returns the owner token of the agent's service with our id ("" if
// there is none) and whether its heartbeat check passes, in one call.
func (g *registration) holder(ctx context.Context) (owner string, passing bool, err error) {
	status, svc, err := g.r.agent.ServiceHealth(ctx, g.svc.ID)
	if err != nil || svc == nil { // nil: no such service
		return "", false, err
	}
	return svc.Meta[metaOwner], status == api.HealthPassing, nil
}

// ours reports whether the agent's service with our id is this
// registration's, or there is none to clash with; opMu held.
func (g *registration) ours(ctx context.Context) bool {
	owner, _, err := g.holder(ctx)
	return err != nil || owner == "" || owner == g.svc.Meta[metaOwner]
}

// register (re-)registers the service with the wanted status; opMu held.
func (g *registration) register(ctx context.Context) error {
	status, gone := g.state()
	if gone {
		return errGone
	}
	g.svc.Check.Status = status
	return g.r.agent.Register(ctx, g.svc)
}

// reconcile heartbeats the TTL check every third of a TTL and re-registers
// whenever the heartbeat fails. It deregisters when the owner's ctx ends.
func (g *registration) reconcile(ownerCtx, loopCtx context.Context) {
	log := g.r.cfg.Logger.With("id", g.svc.ID)
	interval := g.r.cfg.CheckTTL / 3
	retry := g.r.backoff()
	wait := interval
	for {
		t := time.NewTimer(wait)
		select {
		case <-loopCtx.Done():
			t.Stop()
			return
		case <-ownerCtx.Done():
			t.Stop()
			_ = g.Deregister(context.Background())
			return
		case <-t.C:
		}
		if err := g.sync(loopCtx); err != nil {
			if errors.Is(err, discovery.ErrIDTaken) {
				log.Error("consul: another instance registered this id; no longer registered", "err", err)
				g.mu.Lock()
				g.gone = true
				g.mu.Unlock()
				return
			}
			wait = retry.Next()
			if backoff.LogWorthy(retry.Failures()) {
				log.Warn("consul registration out of sync; retrying", "failures", retry.Failures(), "retry_in", wait, "err", err)
			}
			continue
		}
		if n := retry.Failures(); n > 0 {
			log.Info("consul registration restored", "after_failures", n)
		}
		retry.Reset()
		wait = interval
	}
}

// sync pushes the desired status; if the agent does not know the check, it
// registers the service again.
func (g *registration) sync(ctx context.Context) error {
	g.opMu.Lock()
	defer g.opMu.Unlock()
	status, gone := g.state()
	if gone {
		return errGone
	}
	err := g.r.agent.UpdateTTL(ctx, g.checkID, status)
	if err == nil {
		return nil
	}
	if !g.ours(ctx) {
		// Another instance registered this id with the agent after ours
		// went: leave it alone.
		return fmt.Errorf("heartbeat: %w; not re-registering: %w", err, discovery.ErrIDTaken)
	}
	if rerr := g.register(ctx); rerr != nil {
		return fmt.Errorf("heartbeat: %w; re-register: %w", err, rerr)
	}
	return nil
}

func (g *registration) SetHealth(ctx context.Context, h discovery.Health) error {
	status := api.HealthPassing
	if h == discovery.Critical {
		status = api.HealthCritical
	}
	g.mu.Lock()
	if g.gone {
		g.mu.Unlock()
		return discovery.ErrNotFound
	}
	g.status = status
	g.mu.Unlock()
	return g.sync(ctx)
}

// SetMeta registers the service again with the new meta (the agent
// replaces a service registered under the same id), keeping the keys
// that carry the instance's own fields.
func (g *registration) SetMeta(ctx context.Context, meta map[string]string) error {
	g.opMu.Lock()
	defer g.opMu.Unlock()
	if _, gone := g.state(); gone {
		return discovery.ErrNotFound
	}
	cur := g.svc.Meta
	next, err := serviceMeta(meta, cur[metaRole], cur[metaModel], cur[metaVersion], cur[metaOwner])
	if err != nil {
		return err
	}
	if !g.ours(ctx) {
		return fmt.Errorf("consuldisc: set meta: %w", discovery.ErrIDTaken)
	}
	g.svc.Meta = next
	return g.register(ctx)
}

func (g *registration) Deregister(ctx context.Context) error {
	g.mu.Lock()
	if g.gone {
		g.mu.Unlock()
		return nil
	}
	g.gone = true
	g.mu.Unlock()
	g.cancel()
	g.opMu.Lock() // after any heartbeat or re-registration in flight
	defer g.opMu.Unlock()
	if !g.ours(ctx) {
		return nil // another instance holds the id now
	}
	if err := g.r.agent.Deregister(ctx, g.svc.ID); err != nil {
		return fmt.Errorf("consul deregister %s: %w", g.svc.ID, err)
	}
	return nil
}
