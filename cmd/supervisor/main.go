// Command supervisor runs a local Switchyard stack from a spec file (see
// internal/spec): it starts every process, restarts the ones that crash,
// serves the SupervisorService (list, add and drain instances) that the
// planner scales pools through, and on SIGINT or SIGTERM drains the whole
// stack in reverse start order. `make run` writes the spec and starts it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"switchyard.dev/gen/switchyard/supervisor/v1/supervisorv1connect"

	"switchyard.dev/cmd/supervisor/internal/spec"
	"switchyard.dev/cmd/supervisor/internal/supervise"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervisor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	specPath := fs.String("spec", "", "the stack's spec file (JSON; required)")
	listen := fs.String("listen", "127.0.0.1:9600", "address of the SupervisorService API (empty: none)")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil || *specPath == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "supervisor: -spec FILE is required; -log-level is debug, info, warn or error")
		return 2
	}
	b, err := os.ReadFile(*specPath)
	if err != nil {
		fmt.Fprintf(stderr, "supervisor: %v\n", err)
		return 2
	}
	s, err := spec.Parse(b)
	if err != nil {
		fmt.Fprintf(stderr, "supervisor: %s: %v\n", *specPath, err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	sv := supervise.New(s, stdout, log)
	if *listen != "" {
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			fmt.Fprintf(stderr, "supervisor: -listen: %v\n", err)
			return 2
		}
		mux := http.NewServeMux()
		mux.Handle(supervisorv1connect.NewSupervisorServiceHandler(supervise.NewHandler(sv)))
		mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, Protocols: new(http.Protocols)}
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
		go func() { _ = srv.Serve(ln) }()
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		log.Info("serving the supervisor API", "addr", ln.Addr().String())
	}
	if err := sv.Run(ctx); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
