package worker

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/nixl/metadata"
)

// MetaKVTransfer is the discovery metadata key under which a worker with
// a KV transfer agent publishes the agent's endpoint digest
// (metadata.Agent.Endpoints): its name, run and backend addresses.
const MetaKVTransfer = "kv_transfer_endpoints"

// targetGuard admits as remote prefill targets only decode workers listed
// in discovery, and only at the transfer endpoints they published there.
// A RemotePrefill request carries its target's metadata, addresses
// included, and comes from whoever can reach the prefill worker; without
// the guard it could make the worker connect to any address and write KV
// blocks there.
type targetGuard struct {
	reg discovery.Registry
	log *slog.Logger

	mu    sync.Mutex
	known map[string]string // decode instance ID → published endpoint digest
}

// newTargetGuard watches the decode workers in reg until ctx ends.
func newTargetGuard(ctx context.Context, reg discovery.Registry, log *slog.Logger) (*targetGuard, error) {
	ch, err := reg.Watch(ctx, discovery.RoleDecode)
	if err != nil {
		return nil, fmt.Errorf("watching decode workers: %w", err)
	}
	g := &targetGuard{reg: reg, log: log, known: map[string]string{}}
	go func() {
		for ins := range ch {
			g.set(ins)
		}
	}()
	return g, nil
}

func (g *targetGuard) set(ins []discovery.Instance) {
	known := make(map[string]string, len(ins))
	for _, in := range ins {
		if d := in.Meta[MetaKVTransfer]; d != "" {
			known[in.ID] = d
		}
	}
	g.mu.Lock()
	g.known = known
	g.mu.Unlock()
}

// check is disagg.ExportConfig.CheckTarget. A name the watch does not
// know (yet: a decode worker that has just registered) is looked up in
// discovery once more before it is refused.
func (g *targetGuard) check(ctx context.Context, md *metadata.Agent) error {
	want := md.Endpoints()
	g.mu.Lock()
	got, ok := g.known[md.Name]
	g.mu.Unlock()
	if ok && got == want {
		return nil
	}
	ins, err := g.reg.Instances(ctx, discovery.RoleDecode)
	if err != nil {
		return fmt.Errorf("looking the target up in discovery: %w", err)
	}
	g.set(ins)
	for _, in := range ins {
		if in.ID != md.Name {
			continue
		}
		if in.Meta[MetaKVTransfer] == want {
			return nil
		}
		g.log.Warn("remote prefill refused: target metadata does not match the decode worker's published transfer endpoints", "target", md.Name)
		return fmt.Errorf("its endpoints are not those decode worker %q published in discovery", md.Name)
	}
	g.log.Warn("remote prefill refused: target is no decode worker in discovery", "target", md.Name)
	return fmt.Errorf("no decode worker %q with a KV transfer agent in discovery", md.Name)
}
