// Package service is the lifecycle every Switchyard binary shares: parse and
// validate flags, build logger, telemetry and discovery, let the service
// mount its handlers, serve until the context ends (SIGINT/SIGTERM in
// main), then shut down gracefully. A service's main is one line, and tests
// start whole services in-process through Run.
package service

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/config"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/server"
	"switchyard.dev/libs/mesh/telemetry"
	"switchyard.dev/libs/mesh/tlsconf"
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
	// ReloadTLS, if set, makes the service re-read its TLS files at once
	// on each receive, besides the -tls-reload-interval checks (Main
	// sends SIGHUP here).
	ReloadTLS <-chan os.Signal
}

// Runtime is what Setup gets to work with.
type Runtime struct {
	Logger    *slog.Logger
	Registry  discovery.Registry // nil with -discovery=none
	Server    *server.Server
	Telemetry *telemetry.Telemetry
	Common    config.Common
	// TLS holds the instance's mesh certificate and CA, kept current
	// (nil without -tls-cert).
	TLS *tlsconf.Reloader

	ctx     context.Context // lives until the process's run returns
	drained []func(context.Context)

	tlsMu     sync.Mutex
	reloaders []*tlsconf.Reloader // every TLS identity Env.ReloadTLS reloads
}

func (rt *Runtime) addReloader(r *tlsconf.Reloader) {
	rt.tlsMu.Lock()
	defer rt.tlsMu.Unlock()
	rt.reloaders = append(rt.reloaders, r)
}

// reloadOnSignal reloads every TLS identity on each receive from sig
// until ctx ends.
func (rt *Runtime) reloadOnSignal(ctx context.Context, sig <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-sig:
		}
		rt.tlsMu.Lock()
		rs := slices.Clone(rt.reloaders)
		rt.tlsMu.Unlock()
		for _, r := range rs {
			if _, err := r.Reload(); err != nil {
				rt.Logger.Warn("TLS files unreadable; keeping the previous ones", "err", err)
			}
		}
		rt.Logger.Info("TLS files reloaded on signal", "identities", len(rs))
	}
}

// HTTPClient returns an HTTP client for calls to the service's peers:
// h2c to http:// peers and, with -tls-cert, mutual TLS to https:// ones
// (those that publish discovery.MetaTLS), presenting this instance's
// certificate and trusting -tls-ca as current at each new connection.
func (rt *Runtime) HTTPClient() *http.Client {
	if rt.TLS == nil {
		return client.NewHTTP()
	}
	return client.NewHTTPTLS(rt.TLS.DialTLS)
}

// ServePublicTLS makes the server's listener serve TLS with the
// certificate in certFile and keyFile instead of the mesh one, asking
// callers for no certificate (the frontend's OpenAI API), and keeps the
// files current as -tls-reload-interval says. Call it from Setup.
func (rt *Runtime) ServePublicTLS(certFile, keyFile string) error {
	r, err := tlsconf.New(tlsconf.Files{Cert: certFile, Key: keyFile}, rt.Logger)
	if err != nil {
		return fmt.Errorf("public TLS: %w", err)
	}
	go r.Watch(rt.ctx, rt.Common.TLS.ReloadInterval)
	rt.addReloader(r)
	rt.Server.SetTLS(r.ServerConfig(false))
	return nil
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
	// Certificates are reloaded until the very end: a handshake during
	// the drain still gets the current ones.
	lifeCtx, endLife := context.WithCancel(context.WithoutCancel(ctx))
	defer endLife()
	var (
		reloader *tlsconf.Reloader
		srvTLS   *tls.Config
	)
	if common.TLS.Enabled() {
		if reloader, err = tlsconf.New(common.TLS.Files(), log); err != nil {
			return fmt.Errorf("-tls-cert, -tls-key, -tls-ca: %w", err)
		}
		go reloader.Watch(lifeCtx, common.TLS.ReloadInterval)
		srvTLS = reloader.ServerConfig(common.TLS.RequireClientCert)
	}
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
		TLS:             srvTLS,
		HealthListen:    common.HealthListen,
	})
	if err != nil {
		return err
	}
	addr, err := srv.Listen()
	if err != nil {
		return fmt.Errorf("-listen=%q: %w", common.Listen, err)
	}
	rt := &Runtime{Logger: log, Registry: reg, Server: srv, Telemetry: tel, Common: common, TLS: reloader, ctx: lifeCtx}
	if reloader != nil {
		rt.addReloader(reloader)
	}
	if env.ReloadTLS != nil {
		go rt.reloadOnSignal(lifeCtx, env.ReloadTLS)
	}
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

// Main runs spec as the process: it stops on SIGINT or SIGTERM, re-reads
// its TLS files on SIGHUP, and returns the exit code, so that a service's
// main is one line:
//
//	func main() { os.Exit(service.Main(app.Spec(version))) }
func Main(spec Spec) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	return Run(ctx, spec, Env{Args: os.Args[1:], Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, ReloadTLS: hup})
}
