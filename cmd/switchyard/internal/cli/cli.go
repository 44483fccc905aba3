// Package cli is the switchyard command line: it hosts any set of
// Switchyard services in one process, as Grafana Tempo's single binary
// hosts its modules. A service here is exactly what its own binary runs
// (the service.Spec its module exports), with its own flags, listener,
// discovery record and shutdown; the services of one process still find
// and call each other through discovery and their RPC ports, so a mesh
// started with one process behaves as the same mesh of separate ones.
//
//	switchyard [shared flags] SERVICE [flags] [-- SERVICE [flags]]...
//	switchyard [shared flags] all
//	switchyard version
//	switchyard ctl [flags] instances|plan|drain ID
//
// Shared flags, those before the first service, are given to every
// service ahead of its own flags (its own win: a flag's last value
// counts), so they should be the flags every service has (-discovery,
// -discovery-dir, -log-level, ...). A service may be named more than once
// (two decode workers need two -listen addresses). Every group's flags
// are checked before any service starts; once running, the first service
// to stop stops the rest, and the process exits with the first non-zero
// code.
package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"switchyard.dev/cmd/switchyard/internal/ctl"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/services/decode"
	"switchyard.dev/services/frontend"
	kvbmcontroller "switchyard.dev/services/kvbm-controller"
	"switchyard.dev/services/planner"
	"switchyard.dev/services/prefill"
	"switchyard.dev/services/router"
)

// unit is a service this binary can host.
type unit struct {
	name string
	spec func(getenv func(string) string) service.Spec
}

// specs maps each service's name to its Spec, in the order `all` starts
// them and `version` lists them.
var specs = []unit{
	{"frontend", frontend.Spec},
	{"router", router.Spec},
	{"prefill", prefill.Spec},
	{"decode", decode.Spec},
	{"kvbm-controller", kvbmcontroller.Spec},
	{"planner", planner.Spec},
}

// all is the local mesh `switchyard all` runs: every service at its
// default port, aggregated serving (a prefill pool is opt-in).
var all = []string{"decode", "router", "kvbm-controller", "planner", "frontend"}

// Env is the process environment, injected so tests run the command
// in-process.
type Env struct {
	Args   []string
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
	// Ready, if set, is called with each service's name and bound address
	// once it serves.
	Ready func(name string, addr net.Addr)
	// SpanProcessor, if set, receives the spans of every service
	// (service.Env): tests see one request's trace across the mesh.
	SpanProcessor sdktrace.SpanProcessor
}

// Group is one service to run and its flags.
type Group struct {
	Service string
	Args    []string
}

// Exit codes, as every service's.
const (
	exitOK    = service.ExitOK
	exitUsage = service.ExitUsage
)

// Run runs the command until ctx ends or a service stops, and returns the
// process exit code.
func Run(ctx context.Context, env Env) int {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	if len(env.Args) > 0 && env.Args[0] == "ctl" {
		return ctl.Run(ctx, ctl.Env{Args: env.Args[1:], Stdout: env.Stdout, Stderr: env.Stderr, Getenv: env.Getenv})
	}
	if len(env.Args) == 1 && env.Args[0] == "version" {
		for _, s := range specs {
			sp := s.spec(env.Getenv)
			fmt.Fprintf(env.Stdout, "%-16s %s\n", s.name, sp.Version)
		}
		return exitOK
	}
	if len(env.Args) == 0 || slices.Contains([]string{"help", "-h", "-help", "--help"}, env.Args[0]) {
		usage(env.Stdout)
		return exitOK
	}
	groups, err := Parse(env.Args)
	if err != nil {
		fmt.Fprintf(env.Stderr, "switchyard: %v\n", err)
		usage(env.Stderr)
		return exitUsage
	}
	cmds := make([]*service.Command, 0, len(groups))
	for _, g := range groups {
		cmd, code := service.Prepare(specOf(g.Service, env.Getenv), service.Env{
			Args: g.Args, Stdout: env.Stdout, Stderr: env.Stderr, Getenv: env.Getenv,
			Ready: readyFor(g.Service, env.Ready), SpanProcessor: env.SpanProcessor,
		})
		if cmd == nil {
			return code // -help, -version or a bad flag, already reported
		}
		cmds = append(cmds, cmd)
	}
	return runAll(ctx, cmds)
}

// runAll runs every command until ctx ends or one of them returns; then it
// stops the others and waits for them.
func runAll(ctx context.Context, cmds []*service.Command) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	codes := make([]int, len(cmds))
	var wg sync.WaitGroup
	var once sync.Once
	first := -1
	for i, c := range cmds {
		wg.Go(func() {
			codes[i] = c.Run(ctx)
			once.Do(func() { first = i })
			cancel()
		})
	}
	wg.Wait()
	if first >= 0 && codes[first] != exitOK {
		return codes[first]
	}
	for _, c := range codes {
		if c != exitOK {
			return c
		}
	}
	return exitOK
}

// Parse splits the arguments into the services to run: shared flags up to
// the first service name, then groups separated by "--", each led by a
// service name. "all" stands for the whole local mesh.
func Parse(args []string) ([]Group, error) {
	start := slices.IndexFunc(args, func(a string) bool { return a == "all" || known(a) })
	if start < 0 {
		return nil, fmt.Errorf("no service named (want all or one of %s)", names())
	}
	shared := args[:start]
	if start > 0 && !strings.HasPrefix(shared[0], "-") {
		return nil, fmt.Errorf("unknown service %q (want all or one of %s)", shared[0], names())
	}
	var groups []Group
	for rest := args[start:]; len(rest) > 0; {
		end := slices.Index(rest, "--")
		if end < 0 {
			end = len(rest)
		}
		head, own := rest[0], rest[1:end]
		switch {
		case head == "all" && len(own) > 0:
			return nil, fmt.Errorf("all takes no flags of its own (%q): put shared flags before it, or name the services", own[0])
		case head == "all":
			for _, name := range all {
				groups = append(groups, Group{Service: name, Args: slices.Clone(shared)})
			}
		case known(head):
			groups = append(groups, Group{Service: head, Args: append(slices.Clone(shared), own...)})
		default:
			return nil, fmt.Errorf("unknown service %q after -- (want all or one of %s)", head, names())
		}
		if end == len(rest) {
			break
		}
		rest = rest[end+1:]
		if len(rest) == 0 {
			return nil, fmt.Errorf("-- at the end: a service name must follow it")
		}
	}
	return groups, nil
}

func known(name string) bool {
	return slices.ContainsFunc(specs, func(u unit) bool { return u.name == name })
}

// specOf is the Spec of a service Parse admitted.
func specOf(name string, getenv func(string) string) service.Spec {
	i := slices.IndexFunc(specs, func(u unit) bool { return u.name == name })
	return specs[i].spec(getenv)
}

func readyFor(name string, ready func(string, net.Addr)) func(net.Addr) {
	if ready == nil {
		return nil
	}
	return func(a net.Addr) { ready(name, a) }
}

func names() string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.name
	}
	return strings.Join(out, ", ")
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `usage: switchyard [shared flags] SERVICE [flags] [-- SERVICE [flags]]...
       switchyard [shared flags] all
       switchyard version
       switchyard ctl [flags] instances|plan|drain ID

Runs Switchyard services in one process. Services: %s.
all runs %s, each at its default port.
Shared flags (before the first service) go to every service, ahead of its
own; "switchyard SERVICE -help" lists a service's flags. ctl talks to a
running frontend's console API ("switchyard ctl -help").

  switchyard all
  switchyard -discovery-dir /tmp/sy decode -executor sim -- router -mode kv -- frontend
`, names(), strings.Join(all, ", "))
}
