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
	"switchyard.dev/services/frontend/internal/reqtrace"
)

// consoleFlags configure the web console (package console).
type consoleFlags struct {
	enabled       bool
	interval      time.Duration
	timeout       time.Duration
	concurrency   int
	supervisorURL string
	traceEvery    int
	traceKeep     int
}

func (c *consoleFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&c.enabled, "console", true, "serve the web console and its API under /console/")
	fs.DurationVar(&c.interval, "console-interval", 2*time.Second, "how often the console polls the mesh (one shared poll, whatever the number of viewers)")
	fs.DurationVar(&c.timeout, "console-timeout", time.Second, "bound on each call of a console poll; a worker slower than this shows as unreachable")
	fs.IntVar(&c.concurrency, "console-concurrency", 32, "most worker load calls one console poll has in flight")
	fs.IntVar(&c.traceEvery, "console-trace-every", 20, "the console keeps the timeline of one request in this many (0: none)")
	fs.IntVar(&c.traceKeep, "console-trace-keep", 20, "how many sampled request timelines the console keeps")
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
	case c.traceEvery < 0:
		return fmt.Errorf("-console-trace-every=%d: want 0 (none) or more", c.traceEvery)
	case c.traceKeep < 1 || c.traceKeep > 1000:
		return fmt.Errorf("-console-trace-keep=%d: want 1 to 1000", c.traceKeep)
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
func mountConsole(ctx context.Context, rt *service.Runtime, c *consoleFlags, guard *auth.Guard, traces *reqtrace.Ring, hc connect.HTTPClient, opts []connect.ClientOption) {
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
	cc := console.Config{Source: col, Logger: rt.Logger, Stop: ctx.Done(), Traces: traces}
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

// traces is the ring of sampled request timelines the console shows; nil
// without the console.
func (c *consoleFlags) traces() *reqtrace.Ring {
	if !c.enabled || c.traceEvery == 0 {
		return nil
	}
	return reqtrace.New(c.traceEvery, c.traceKeep)
}
