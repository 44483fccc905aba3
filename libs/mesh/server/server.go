// Package server is the runtime every Switchyard service shares: one h2c
// HTTP server carrying the service's Connect handlers, gRPC health and
// reflection, the InfoService, Prometheus metrics and plain health
// endpoints, with the interceptors every handler gets (tracing, metrics,
// request ids, logging, panic recovery, deadlines, message size limits),
// discovery registration, and graceful shutdown.
//
// Shutdown order matters and is fixed here so no service gets it wrong: when
// the run context ends the instance turns unhealthy (gRPC health
// NOT_SERVING, discovery critical), deregisters, lets in-flight requests and
// streams finish for up to DrainTimeout, then closes what is left.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"switchyard.dev/gen/switchyard/mesh/v1/meshv1connect"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/reqid"
	"switchyard.dev/libs/mesh/rpclimit"
	"switchyard.dev/libs/mesh/telemetry"
)

// Config configures one service instance's server.
type Config struct {
	Instance discovery.Instance // Address may be empty: the bound address is used
	Listen   string             // host:port to bind
	// Registry is where the instance registers; nil means it does not.
	Registry     discovery.Registry
	Telemetry    *telemetry.Telemetry
	Logger       *slog.Logger
	DrainTimeout time.Duration // default 10s
	// DeregisterGrace: on shutdown, serve this long after leaving
	// discovery before refusing new requests (default 0; no grace without
	// a Registry, as there is nothing to leave).
	DeregisterGrace time.Duration
	// GraceOver, if set, is called once on shutdown when the server stops
	// taking new work: after the grace, before the drain (the service's
	// background work stops then, on the same clock).
	GraceOver func()
	// UnaryTimeout is the deadline of unary handlers whose caller set none
	// (default rpclimit.DefaultUnaryTimeout); callers' deadlines are
	// capped at 10× it.
	UnaryTimeout time.Duration
	// MaxMessageBytes bounds one RPC message, received or sent (default
	// rpclimit.DefaultMaxMessageBytes): a larger one fails the call with
	// ResourceExhausted.
	MaxMessageBytes int
	// Info adds service-specific detail to InfoService responses.
	Info InfoFunc
	// Pprof serves net/http/pprof at /debug/pprof/.
	Pprof bool
	// TLS, if set, makes the listener serve TLS (HTTP/2 and HTTP/1.1 by
	// ALPN) instead of h2c, and the instance publish discovery.MetaTLS so
	// callers dial https. Its ClientAuth decides whether callers need
	// certificates (package tlsconf builds it).
	TLS *tls.Config
	// HealthListen, if set, is a second host:port serving only GET /live,
	// /ready and /health over plain HTTP, whatever TLS says: for
	// orchestrators' health checks, which hold no mesh certificate. It
	// reports draining as the main listener does and closes after it.
	HealthListen string
}

// Server is one instance's HTTP server.
type Server struct {
	cfg      Config
	mux      *http.ServeMux
	checker  *grpchealth.StaticChecker
	services []string
	opts     []connect.HandlerOption
	started  time.Time

	mu        sync.Mutex
	ln        net.Listener
	healthLn  net.Listener // with Config.HealthListen
	draining  bool
	unhealthy error                  // SetHealthy's latest report
	reg       discovery.Registration // once registered

	metaMu sync.Mutex // orders PublishMeta's updates of the registration
}

// New builds a server; handlers are added with Mount and Handle before Serve.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Telemetry == nil {
		return nil, errors.New("server: nil telemetry")
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 10 * time.Second
	}
	l := rpclimit.Limits{MaxMessageBytes: cfg.MaxMessageBytes, UnaryTimeout: cfg.UnaryTimeout}.WithDefaults()
	cfg.MaxMessageBytes, cfg.UnaryTimeout = l.MaxMessageBytes, l.UnaryTimeout
	otel, err := cfg.Telemetry.ConnectInterceptor()
	if err != nil {
		return nil, fmt.Errorf("server: otel interceptor: %w", err)
	}
	cfg.Instance = cfg.Instance.Clone()
	if cfg.TLS != nil {
		if cfg.Instance.Meta == nil {
			cfg.Instance.Meta = map[string]string{}
		}
		cfg.Instance.Meta[discovery.MetaTLS] = "1"
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), checker: grpchealth.NewStaticChecker(), started: time.Now()}
	s.opts = []connect.HandlerOption{
		// reqid after otel (it tags the span otel starts), before logging
		// (whose lines then carry the id).
		connect.WithInterceptors(otel, reqid.NewInterceptor(), loggingInterceptor{cfg.Logger},
			deadlineInterceptor{def: cfg.UnaryTimeout, max: 10 * cfg.UnaryTimeout}),
		connect.WithRecover(recoverHandler(cfg.Logger)),
		connect.WithReadMaxBytes(cfg.MaxMessageBytes),
		connect.WithSendMaxBytes(cfg.MaxMessageBytes),
		// Token streams are many tiny messages: gzip would cost more than it saves.
		connect.WithCompressMinBytes(4096),
	}
	s.Mount(meshv1connect.NewInfoServiceHandler(&infoService{s: s}, s.opts...))
	s.mux.Handle("GET /metrics", cfg.Telemetry.MetricsHandler())
	s.handleHealth(s.mux)
	if cfg.Pprof {
		s.mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		s.mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		s.mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		s.mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		s.mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	return s, nil
}

// HandlerOptions are the options every Connect handler of this service must
// use (interceptors, limits, recovery).
func (s *Server) HandlerOptions() []connect.HandlerOption { return s.opts }

// DrainTimeout is how long Serve lets requests finish on shutdown, the
// default applied (so services size their own drains by it).
func (s *Server) DrainTimeout() time.Duration { return s.cfg.DrainTimeout }

// Mount adds a Connect handler as returned by a generated New...Handler.
func (s *Server) Mount(path string, h http.Handler) {
	s.mux.Handle(path, h)
	s.services = append(s.services, strings.Trim(path, "/"))
}

// Handle adds a plain HTTP handler (the frontend's OpenAI API), traced as
// Connect handlers are: each request gets a server span that continues
// the caller's trace (a traceparent header), so the calls the handler
// makes with the request's context are its children, one trace per
// request.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.mux.Handle(pattern, s.cfg.Telemetry.HTTPHandler(h))
}

// SetTLS replaces Config.TLS before Serve: for a listener whose
// certificate is not the instance's mesh one (the frontend's public
// OpenAI listener). nil serves h2c.
func (s *Server) SetTLS(c *tls.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.TLS = c
	if c == nil {
		delete(s.cfg.Instance.Meta, discovery.MetaTLS)
		return
	}
	if s.cfg.Instance.Meta == nil {
		s.cfg.Instance.Meta = map[string]string{}
	}
	s.cfg.Instance.Meta[discovery.MetaTLS] = "1"
}

func (s *Server) tlsConfig() *tls.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.TLS
}

// Listen binds the listener, and the health listener if configured; Addr
// is valid afterwards.
func (s *Server) Listen() (net.Addr, error) {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %q: %w", s.cfg.Listen, err)
	}
	var hln net.Listener
	if s.cfg.HealthListen != "" {
		if hln, err = net.Listen("tcp", s.cfg.HealthListen); err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("health listen %q: %w", s.cfg.HealthListen, err)
		}
	}
	s.mu.Lock()
	s.ln, s.healthLn = ln, hln
	s.mu.Unlock()
	return ln.Addr(), nil
}

// Instance is the instance as registered (address filled in after Listen).
func (s *Server) Instance() discovery.Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.cfg.Instance.Clone()
	if in.Address == "" && s.ln != nil {
		in.Address = publishable(s.ln.Addr())
	}
	return in
}

// publishable is the bound address as peers can dial it: a wildcard bind
// is published as loopback (the same-host discovery it can serve; -listen
// on every interface with Consul needs -advertise, config.Validate).
func publishable(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", port) // Go's wildcard listeners take IPv4 too
	}
	return a.String()
}

func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	draining, unhealthy := s.draining, s.unhealthy
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if draining {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"status":"draining","version":%q}`+"\n", s.cfg.Instance.Version)
		return
	}
	if unhealthy != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, `{"status":"unhealthy","reason":%q,"version":%q}`+"\n", unhealthy.Error(), s.cfg.Instance.Version)
		return
	}
	fmt.Fprintf(w, `{"status":"ok","role":%q,"version":%q}`+"\n", s.cfg.Instance.Role, s.cfg.Instance.Version)
}

// Serve serves until ctx ends, then shuts down gracefully. It registers the
// instance once serving and deregisters before draining.
func (s *Server) Serve(ctx context.Context) error {
	if s.ln == nil {
		if _, err := s.Listen(); err != nil {
			return err
		}
	}
	s.mux.Handle(grpchealth.NewHandler(s.checker, s.opts...))
	reflector := grpcreflect.NewStaticReflector(append([]string{grpchealth.HealthV1ServiceName}, s.services...)...)
	s.mux.Handle(grpcreflect.NewHandlerV1(reflector))
	s.mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	status := grpchealth.StatusServing
	s.mu.Lock()
	if s.unhealthy != nil {
		status = grpchealth.StatusNotServing
	}
	s.mu.Unlock()
	s.checker.SetStatus("", status)
	for _, svc := range s.services {
		s.checker.SetStatus(svc, status)
	}

	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	tlsConf := s.tlsConfig()
	if tlsConf != nil {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	hs := &http.Server{
		Handler:           s.mux,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    1 << 20,
		IdleTimeout:       2 * time.Minute,
		Protocols:         protocols,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		TLSConfig:         tlsConf,
		// Refused handshakes (a caller without a certificate) are worth
		// a line in the service's log, not on the process's stderr.
		ErrorLog: slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 2) // the main listener and the health one
	go func() {
		if tlsConf != nil {
			errc <- hs.ServeTLS(s.ln, "", "")
			return
		}
		errc <- hs.Serve(s.ln)
	}()
	health := s.serveHealth(ctx, errc)

	var reg discovery.Registration
	if s.cfg.Registry != nil {
		// Under metaMu: a PublishMeta between the snapshot registered and
		// s.reg would otherwise reach neither.
		s.metaMu.Lock()
		r, err := s.cfg.Registry.Register(context.WithoutCancel(ctx), s.Instance())
		if err == nil {
			s.mu.Lock()
			s.reg = r
			unhealthy := s.unhealthy
			s.mu.Unlock()
			if unhealthy != nil {
				_ = r.SetHealth(context.WithoutCancel(ctx), discovery.Critical)
			}
		}
		s.metaMu.Unlock()
		if err != nil {
			_ = hs.Close()
			closeHealth(health)
			return fmt.Errorf("register %s: %w", s.cfg.Instance.ID, err)
		}
		reg = r
	}
	log := s.cfg.Logger
	if a := s.HealthAddr(); a != nil {
		log = log.With("health_addr", a.String())
	}
	log.Info("serving", "role", s.cfg.Instance.Role, "id", s.cfg.Instance.ID, "addr", s.ln.Addr().String(), "version", s.cfg.Instance.Version)

	select {
	case err := <-errc:
		if reg != nil {
			_ = reg.Deregister(context.Background())
		}
		s.graceOver()
		_ = hs.Close()
		closeHealth(health)
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	err := s.shutdown(hs, reg)
	// Only now: the orchestrator's checks see "draining" for the whole
	// drain, as the main listener's callers do.
	closeHealth(health)
	return err
}

func (s *Server) shutdown(hs *http.Server, reg discovery.Registration) error {
	s.cfg.Logger.Info("shutting down", "drain_timeout", s.cfg.DrainTimeout)
	graceEnds := time.Now().Add(s.cfg.DeregisterGrace)
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	s.checker.SetStatus("", grpchealth.StatusNotServing)
	for _, svc := range s.services {
		s.checker.SetStatus(svc, grpchealth.StatusNotServing)
	}
	var errs []error
	if reg != nil {
		bg, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = reg.SetHealth(bg, discovery.Critical)
		if err := reg.Deregister(bg); err != nil {
			errs = append(errs, err)
		}
		cancel()
		if g := time.Until(graceEnds); g > 0 {
			s.cfg.Logger.Info("left discovery; serving on while peers notice", "for", g)
			time.Sleep(g)
		}
	}
	s.graceOver()
	drain, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	if err := hs.Shutdown(drain); err != nil {
		s.cfg.Logger.Warn("drain timed out; closing remaining connections", "err", err)
		errs = append(errs, hs.Close())
	}
	s.cfg.Logger.Info("stopped")
	return errors.Join(errs...)
}

func (s *Server) graceOver() {
	if s.cfg.GraceOver != nil {
		s.cfg.GraceOver()
	}
}

// SetHealthy reports the health of what the service depends on while it
// serves (a worker's engine process): with err set, /health answers 503,
// gRPC health NOT_SERVING, and the registration turns Critical, so
// watchers stop listing the instance; with nil, it serves again. A report
// before Serve registers applies at registration.
func (s *Server) SetHealthy(ctx context.Context, err error) error {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	s.mu.Lock()
	s.unhealthy = err
	reg, draining := s.reg, s.draining
	s.mu.Unlock()
	if draining {
		return nil
	}
	status, h := grpchealth.StatusServing, discovery.Passing
	if err != nil {
		status, h = grpchealth.StatusNotServing, discovery.Critical
	}
	s.checker.SetStatus("", status)
	for _, svc := range s.services {
		s.checker.SetStatus(svc, status)
	}
	if reg == nil {
		return nil
	}
	return reg.SetHealth(ctx, h)
}

// SetInfo replaces Config.Info, for detail a service learns in Setup (a
// worker's GPUs).
func (s *Server) SetInfo(f InfoFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Info = f
}

// PublishMeta edits the instance's meta: before Serve registers the
// instance, what it registers; after, the registration as well, so
// watchers see what a service measured while it runs.
func (s *Server) PublishMeta(ctx context.Context, f func(meta map[string]string)) error {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	s.mu.Lock()
	if s.cfg.Instance.Meta == nil {
		s.cfg.Instance.Meta = map[string]string{}
	}
	f(s.cfg.Instance.Meta)
	meta, reg := maps.Clone(s.cfg.Instance.Meta), s.reg
	s.mu.Unlock()
	if reg == nil {
		return nil
	}
	return reg.SetMeta(ctx, meta)
}

// UpdateInstance edits the instance before Serve registers it (for example
// to set the model and KV capacity that a worker learns while loading).
func (s *Server) UpdateInstance(f func(*discovery.Instance)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.cfg.Instance)
}
