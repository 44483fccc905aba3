package httpapi

import (
	"net/http"
	"strconv"
	"time"
)

// instrument counts requests by endpoint and status, and times them.
func (a *API) instrument(endpoint string, next http.Handler) http.Handler {
	m := a.cfg.Metrics
	if m == nil {
		return next
	}
	inflight := m.InFlight.WithLabelValues(endpoint)
	duration := m.Duration.WithLabelValues(endpoint)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		inflight.Inc()
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			inflight.Dec()
			duration.Observe(time.Since(start).Seconds())
			status := sw.status
			if r.Context().Err() != nil && status == 0 {
				status = 499 // client went away before any answer
			}
			m.Requests.WithLabelValues(endpoint, strconv.Itoa(status)).Inc()
		}()
		next.ServeHTTP(sw, r)
	})
}

// statusWriter records the status; Unwrap keeps http.ResponseController
// (Flush) working through it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
