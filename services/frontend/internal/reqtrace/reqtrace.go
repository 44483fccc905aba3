// Package reqtrace keeps a sample of recent requests' timelines as the
// frontend saw them, for the console: when each arrived, how it was
// tokenized, which router and workers served it (with their versions and
// the router's reasons), its first token, every migration, and how it
// ended, with its request id and trace id so the whole distributed trace
// can be found in the tracing backend.
//
// Sampling is one request in Every, counted, not random, so a quiet
// mesh still shows its requests; a Recorder of an unsampled request is
// nil and every method on it is a no-op, so the request path pays one
// atomic add when it is not sampled.
package reqtrace

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// MaxEvents bounds one timeline (a request migrating many times).
const MaxEvents = 64

// Event is one step of a request, at its offset from the arrival.
type Event struct {
	AtMillis float64 `json:"at_ms"`
	Kind     string  `json:"kind"`
	Detail   string  `json:"detail,omitempty"`
}

// Trace is one request's timeline.
type Trace struct {
	RequestID string    `json:"request_id"`
	TraceID   string    `json:"trace_id,omitempty"`
	Endpoint  string    `json:"endpoint"`
	Model     string    `json:"model"`
	Start     time.Time `json:"start"`
	Events    []Event   `json:"events"`
	// Done is set once the request ended; Error is its failure, if any.
	Done       bool    `json:"done"`
	DurationMs float64 `json:"duration_ms,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// Ring keeps the last Keep sampled traces. Safe for concurrent use.
type Ring struct {
	every uint64
	n     atomic.Uint64
	mu    sync.Mutex
	keep  int
	buf   []*Recorder // oldest first
}

// New returns a ring sampling one request in every (0 samples none) and
// keeping the last keep.
func New(every, keep int) *Ring {
	return &Ring{every: uint64(max(every, 0)), keep: max(keep, 1)}
}

// Start begins the timeline of a request, or returns nil when it is not
// sampled.
func (r *Ring) Start(requestID, traceID, endpoint, model string) *Recorder {
	if r == nil || r.every == 0 || (r.n.Add(1)-1)%r.every != 0 {
		return nil
	}
	rec := &Recorder{t: Trace{RequestID: requestID, TraceID: traceID, Endpoint: endpoint, Model: model, Start: time.Now()}}
	r.mu.Lock()
	r.buf = append(r.buf, rec)
	if over := len(r.buf) - r.keep; over > 0 {
		r.buf = slices.Delete(r.buf, 0, over)
	}
	r.mu.Unlock()
	return rec
}

// Recent returns copies of the kept traces, newest first.
func (r *Ring) Recent() []Trace {
	r.mu.Lock()
	recs := slices.Clone(r.buf)
	r.mu.Unlock()
	out := make([]Trace, 0, len(recs))
	for i := len(recs) - 1; i >= 0; i-- {
		out = append(out, recs[i].snapshot())
	}
	return out
}

// Recorder records one sampled request; nil records nothing.
type Recorder struct {
	mu sync.Mutex
	t  Trace
}

// Event adds a step; the detail is formatted only for a sampled request.
func (rec *Recorder) Event(kind, format string, args ...any) {
	if rec == nil {
		return
	}
	at := float64(time.Since(rec.t.Start).Microseconds()) / 1000
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.t.Events) >= MaxEvents || rec.t.Done {
		return
	}
	rec.t.Events = append(rec.t.Events, Event{AtMillis: at, Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// End closes the timeline with the request's outcome.
func (rec *Recorder) End(err error) {
	if rec == nil {
		return
	}
	d := float64(time.Since(rec.t.Start).Microseconds()) / 1000
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.t.Done {
		return
	}
	rec.t.Done, rec.t.DurationMs = true, d
	if err != nil {
		rec.t.Error = err.Error()
	}
}

func (rec *Recorder) snapshot() Trace {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	t := rec.t
	t.Events = slices.Clone(t.Events)
	return t
}
