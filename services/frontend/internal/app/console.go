package app

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"time"

	"connectrpc.com/connect"

	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/frontend/internal/auth"
	"switchyard.dev/services/frontend/internal/console"
	"switchyard.dev/services/frontend/internal/fleet"
)

// consoleFlags configure the web console (package console).
type consoleFlags struct {
	enabled       bool
	interval      time.Duration
	timeout       time.Duration
	concurrency   int
	supervisorURL string
}

func (c *consoleFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&c.enabled, "console", true, "serve the web console and its API under /console/")
	fs.DurationVar(&c.interval, "console-interval", 2*time.Second, "how often the console polls the mesh (one shared poll, whatever the number of viewers)")
	fs.DurationVar(&c.timeout, "console-timeout", time.Second, "bound on each call of a console poll; a worker slower than this shows as unreachable")
	fs.IntVar(&c.concurrency, "console-concurrency", 32, "most worker load calls one console poll has in flight")
	fs.StringVar(&c.supervisorURL, "supervisor-url", "", "the local supervisor's API, through which console admins drain workers (empty: no draining)")
}

func (c *consoleFlags) validate() error {
	switch {
	case c.interval <= 0:
		return fmt.Errorf("-console-interval=%v: must be positive", c.interval)
	case c.timeout <= 0:
		return fmt.Errorf("-console-timeout=%v: must be positive", c.timeout)
	case c.concurrency <= 0:
		return fmt.Errorf("-console-concurrency=%d: must be positive", c.concurrency)
	}
	if c.supervisorURL != "" {
		if p, err := url.Parse(c.supervisorURL); err != nil || p.Scheme != "http" || p.Host == "" {
			return fmt.Errorf("-supervisor-url=%q: want http://host:port", c.supervisorURL)
		}
	}
	return nil
}

// mountConsole starts the console's poll loop and serves it. ctx ends
// when the frontend stops taking work: the poll stops and open event
// streams end, so they do not hold the drain.
func mountConsole(ctx context.Context, rt *service.Runtime, c *consoleFlags, guard *auth.Guard, hc connect.HTTPClient, opts []connect.ClientOption) {
	if !c.enabled {
		return
	}
	cfg := fleet.Config{
		HTTPClient: hc, Options: opts, Gatherer: rt.Telemetry.Registry, Logger: rt.Logger,
		Interval: c.interval, Timeout: c.timeout, Concurrency: c.concurrency,
	}
	if rt.Registry != nil {
		cfg.Registry = rt.Registry
	}
	col := fleet.New(cfg)
	go col.Run(ctx)
	cc := console.Config{Source: col, Logger: rt.Logger, Stop: ctx.Done()}
	if guard != nil {
		cc.Guard = guard
	}
	if c.supervisorURL != "" {
		cc.Drainer = console.NewSupervisor(hc, c.supervisorURL, opts...)
	}
	if rt.Registry != nil {
		cc.Operator = &console.MeshOperator{Registry: rt.Registry, HTTP: hc, Options: opts}
	}
	rt.Server.Handle(console.Prefix, console.New(cc))
}
