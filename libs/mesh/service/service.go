// Package service is the lifecycle every Switchyard binary shares: parse and
// validate flags, build logger, telemetry and discovery, let the service
// mount its handlers, serve until the context ends (SIGINT/SIGTERM in
// main), then shut down gracefully. A service's main is one line, and tests
// start whole services in-process through Run.
package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"connectrpc.com/connect"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/config"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/server"
	"switchyard.dev/libs/mesh/telemetry"
)

// Spec describes one service.
type Spec struct {
	Role          string
	Version       string
	DefaultListen string
	// Flags registers the service's own flags.
	Flags func(fs *flag.FlagSet)
	// Validate checks the service's own flags after parsing.
	Validate func() error
	// Setup mounts handlers and starts background work bound to ctx, which
	// ends when shutdown begins. It may edit rt.Instance before serving.
	Setup func(ctx context.Context, rt *Runtime) error
}

// Env is the process environment, injected so tests can run services
// in-process.
type Env struct {
	Args   []string
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Ready, if set, is called with the bound address once serving.
	Ready func(net.Addr)
	// SpanProcessor, if set, receives every span the service records, on
	// top of what the OTEL_* settings export: tests collect a mesh's
	// spans with it (tracetest.SpanRecorder).
	SpanProcessor sdktrace.SpanProcessor
}

// Runtime is what Setup gets to work with.
type Runtime struct {
	Logger    *slog.Logger
	Registry  discovery.Registry // nil with -discovery=none
	Server    *server.Server
	Telemetry *telemetry.Telemetry
	Common    config.Common

	drained []func(context.Context)
}

// ClientOptions are the Connect client options for the service's calls to
// its peers: tracing, the request id, and the -rpc-* limits
// (client.OptionsWith).
func (rt *Runtime) ClientOptions() ([]connect.ClientOption, error) {
	return client.OptionsWith(rt.Telemetry, rt.Common.RPC)
}

// AfterDrain registers f to run at shutdown once the server has drained
// its requests (before telemetry flushes), with a context bounded by
// -drain-timeout: to send what the last requests left queued.
func (rt *Runtime) AfterDrain(f func(context.Context)) { rt.drained = append(rt.drained, f) }

// Exit codes.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

// Run runs the service until ctx ends and returns the process exit code.
func Run(ctx context.Context, spec Spec, env Env) int {
	cmd, code := Prepare(spec, env)
	if cmd == nil {
		return code
	}
	return cmd.Run(ctx)
}

// Command is a service whose flags are parsed and valid, ready to run.
// Prepare and Command.Run split Run in two so that a process hosting
// several services (the switchyard binary) can check every service's
// flags before it starts any of them.
type Command struct {
	spec   Spec
	env    Env
	common config.Common
	log    *slog.Logger
}

// Prepare parses and validates env.Args for spec. It returns a nil Command
// and the exit code when the process should stop here: ExitOK after -help
// or -version, ExitUsage after a bad flag (already reported on env.Stderr).
func Prepare(spec Spec, env Env) (*Command, int) {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	fs := flag.NewFlagSet(spec.Role, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	var common config.Common
	common.Register(fs, spec.DefaultListen, env.Getenv)
	showVersion := fs.Bool("version", false, "print the version and exit")
	if spec.Flags != nil {
		spec.Flags(fs)
	}
	if err := fs.Parse(env.Args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, ExitOK
		}
		return nil, ExitUsage // flag already printed the error and usage
	}
	if *showVersion {
		fmt.Fprintf(env.Stdout, "%s %s\n", spec.Role, spec.Version)
		return nil, ExitOK
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "%s: unexpected argument %q\n", spec.Role, fs.Arg(0))
		return nil, ExitUsage
	}
	if err := common.Validate(); err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", spec.Role, err)
		return nil, ExitUsage
	}
	if spec.Validate != nil {
		if err := spec.Validate(); err != nil {
			fmt.Fprintf(env.Stderr, "%s: %v\n", spec.Role, err)
			return nil, ExitUsage
		}
	}
	return &Command{spec: spec, env: env, common: common, log: common.Logger(env.Stderr, spec.Role)}, ExitOK
}

// Run serves until ctx ends and returns the process exit code.
func (c *Command) Run(ctx context.Context) int {
	if err := run(ctx, c.spec, c.env, c.common, c.log); err != nil {
		c.log.Error("exiting", "err", err)
		fmt.Fprintf(c.env.Stderr, "%s: %v\n", c.spec.Role, err)
		return ExitError
	}
	return ExitOK
}

func run(ctx context.Context, spec Spec, env Env, common config.Common, log *slog.Logger) (err error) {
	id := common.ID(spec.Role)
	tel, err := telemetry.New(ctx, telemetry.Config{Service: "switchyard-" + spec.Role, Version: spec.Version, InstanceID: id,
		Getenv: env.Getenv, Stdout: env.Stdout, SpanProcessor: env.SpanProcessor})
	if err != nil {
		return err
	}
	// Telemetry is flushed on every way out, after the server drained.
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), telemetryFlushTimeout)
		defer cancel()
		err = errors.Join(err, tel.Shutdown(fctx))
	}()
	reg, err := common.OpenRegistry(ctx, log)
	if err != nil {
		return err
	}
	// Background work stops when the server stops taking new work: once
	// the instance has left discovery and the grace for peers to notice
	// has passed (at once without discovery), before the drain.
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	srv, err := server.New(server.Config{
		Instance:        discovery.Instance{ID: id, Role: spec.Role, Version: spec.Version, Address: common.Advertise, Tags: common.TagList()},
		Listen:          common.Listen,
		Registry:        reg,
		Telemetry:       tel,
		Logger:          log,
		DrainTimeout:    common.DrainTimeout,
		DeregisterGrace: common.DeregisterGrace,
		GraceOver:       stopWork,
		UnaryTimeout:    common.RPC.UnaryTimeout,
		MaxMessageBytes: common.RPC.MaxMessageBytes,
		Pprof:           common.Pprof,
	})
	if err != nil {
		return err
	}
	addr, err := srv.Listen()
	if err != nil {
		return fmt.Errorf("-listen=%q: %w", common.Listen, err)
	}
	rt := &Runtime{Logger: log, Registry: reg, Server: srv, Telemetry: tel, Common: common}
	if spec.Setup != nil {
		if err := spec.Setup(workCtx, rt); err != nil {
			return err
		}
	}
	if env.Ready != nil {
		env.Ready(addr)
	}
	err = srv.Serve(ctx)
	if len(rt.drained) > 0 {
		dctx, cancel := context.WithTimeout(context.Background(), max(srv.DrainTimeout(), time.Second))
		defer cancel()
		for _, f := range rt.drained {
			f(dctx)
		}
	}
	return err
}

// telemetryFlushTimeout bounds the final export of spans and metrics.
const telemetryFlushTimeout = 5 * time.Second

// Main runs spec as the process: it stops on SIGINT or SIGTERM and returns
// the exit code, so that a service's main is one line:
//
//	func main() { os.Exit(service.Main(app.Spec(version))) }
func Main(spec Spec) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, spec, Env{Args: os.Args[1:], Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
}
