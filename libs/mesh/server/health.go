package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// handleHealth adds the plain health endpoints to mux: the main
// listener's and the health listener's are the same handlers, so both
// report the same state, draining included.
func (s *Server) handleHealth(mux *http.ServeMux) {
	mux.HandleFunc("GET /live", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /ready", s.ready)
	mux.HandleFunc("GET /health", s.ready)
}

// HealthAddr is the health listener's bound address after Listen (nil
// without Config.HealthListen).
func (s *Server) HealthAddr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.healthLn == nil {
		return nil
	}
	return s.healthLn.Addr()
}

// serveHealth serves the health listener, if there is one, over plain
// HTTP/1.1: orchestrators' checks (Consul, Nomad, Kubernetes probes) hold
// no mesh certificate, so it asks for none, and it carries nothing but
// liveness and readiness (no RPCs, no metrics) so that asking for none
// exposes nothing else. A failure to serve is reported on errc, as the
// main listener's is.
func (s *Server) serveHealth(ctx context.Context, errc chan<- error) *http.Server {
	s.mu.Lock()
	ln := s.healthLn
	s.mu.Unlock()
	if ln == nil {
		return nil
	}
	mux := http.NewServeMux()
	s.handleHealth(mux)
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    16 << 10,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelWarn),
	}
	go func() {
		err := hs.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			return
		}
		select {
		case errc <- fmt.Errorf("health listener: %w", err):
		default: // the main listener's failure is being reported already
		}
	}()
	return hs
}

// closeHealth stops the health listener at once: health checks are
// short, and by now there is nothing left to report on.
func closeHealth(hs *http.Server) {
	if hs != nil {
		_ = hs.Close()
	}
}
