// Package app wires the planner service: every interval it observes each
// model (the frontends' metrics, the workers' load), plans its prefill
// and decode pools against the TTFT and ITL targets from the model's
// profile (internal/policy), and, as the one leader, scales them through
// an actuator (the local supervisor, or Nomad). GetPlan reports every
// pool's desired count and the reason for it; a model without a profile
// is observed only.
package app

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"connectrpc.com/connect"

	"switchyard.dev/gen/switchyard/planner/v1/plannerv1connect"
	"switchyard.dev/libs/mesh/canary"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/service"

	"switchyard.dev/services/planner/internal/actuate"
	"switchyard.dev/services/planner/internal/leader"
	"switchyard.dev/services/planner/internal/observe"
	"switchyard.dev/services/planner/internal/rollout"
)

// Spec describes the planner service.
func Spec(version string) service.Spec {
	var f flags
	return service.Spec{
		Role:          discovery.RolePlanner,
		Version:       version,
		DefaultListen: "127.0.0.1:9400",
		Flags:         func(fs *flag.FlagSet) { f.register(fs) },
		Validate:      f.validate,
		Setup: func(ctx context.Context, rt *service.Runtime) error {
			p := newPlanner(rt.Registry)
			p.cfg, p.log = f, rt.Logger
			var err error
			if p.profiles, err = loadProfiles(f.profilePaths()); err != nil {
				return err
			}
			if p.metrics, err = newMetrics(rt.Telemetry.Registry); err != nil {
				return err
			}
			p.http = &http.Client{Timeout: f.sampleTimeout}
			if rt.TLS != nil {
				// Workers and frontends then serve mutual TLS only.
				p.http = rt.HTTPClient()
				p.http.Timeout = f.sampleTimeout
			}
			p.scraper = observe.NewFrontends(p.http)
			if p.copts, err = rt.ClientOptions(); err != nil {
				return err
			}
			if p.act, err = newActuator(f, p.copts); err != nil {
				return err
			}
			if p.lock, err = newLock(f, rt); err != nil {
				return err
			}
			if p.ro, err = newRollouts(f, rt, p.act); err != nil {
				return err
			}
			if rt.Registry != nil {
				if err := p.watch(ctx, rt.Logger); err != nil {
					return err
				}
				if err := canary.Follow(ctx, rt.Registry, rt.Logger, p.ro.seen); err != nil {
					return err
				}
				go p.run(ctx)
			}
			rt.Server.Mount(plannerv1connect.NewPlannerServiceHandler(p, rt.Server.HandlerOptions()...))
			return nil
		},
	}
}

func newActuator(f flags, opts []connect.ClientOption) (actuate.Actuator, error) {
	switch f.actuator {
	case "supervisor":
		return actuate.NewSupervisor(f.supervisorURL, &http.Client{Timeout: 10 * time.Second}, opts...), nil
	case "nomad":
		n, err := actuate.NewNomad(f.nomad)
		if err != nil {
			return nil, fmt.Errorf("-actuator nomad: %w", err)
		}
		return n, nil
	}
	return nil, nil
}

// newRollouts is the rollout controller, ending rollouts through the
// actuator in use.
func newRollouts(f flags, rt *service.Runtime, act actuate.Actuator) (*rollouts, error) {
	e := ender{reg: rt.Registry}
	switch a := act.(type) {
	case *actuate.Nomad:
		e.nomad = a
	case *actuate.Supervisor:
		e.sup = a
	}
	ctl, err := rollout.New(f.rollout, e, rt.Logger)
	if err != nil {
		return nil, fmt.Errorf("-rollout-*: %w", err)
	}
	seen, err := canary.NewSplit(0)
	if err != nil {
		return nil, err
	}
	publish := func(ctx context.Context, v string, ok bool) error {
		return rt.Server.PublishMeta(ctx, func(meta map[string]string) {
			if ok {
				meta[discovery.MetaRollouts] = v
			} else {
				delete(meta, discovery.MetaRollouts)
			}
		})
	}
	return &rollouts{ctl: ctl, seen: seen, publish: publish, log: rt.Logger}, nil
}

// newLock is the leader lock for the discovery backend in use: a file
// beside file discovery's records, a Consul key with Consul; none without
// discovery.
func newLock(f flags, rt *service.Runtime) (leader.Lock, error) {
	switch rt.Common.Discovery {
	case "file":
		path := f.leaderLock
		if path == "" {
			path = filepath.Join(rt.Common.DiscoveryDir, "planner.lock")
		}
		return leader.NewFile(path), nil
	case "consul":
		key := f.leaderLock
		if key == "" {
			key = "switchyard/planner/leader"
		}
		l, err := leader.NewConsul(rt.Common.ConsulAddr, rt.Common.ConsulToken, key, 10*time.Second)
		if err != nil {
			return nil, fmt.Errorf("-leader-lock: %w", err)
		}
		return l, nil
	}
	return nil, nil
}
