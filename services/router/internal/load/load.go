// Package load tracks the load a router predicts for the requests it (and
// its peer replicas) just routed, so a burst of decisions taken before any
// worker reports back does not all land on the same worker.
//
// A routed request counts its uncached prompt blocks as active prefill on
// the worker that prefills it until its prefill is done (reported, or
// estimated by a deadline), and its KV blocks as decode load on the decode
// worker until it is released or its TTL passes. Requests are keyed by
// (origin router, request id), so replicas never confuse each other's ids
// and applying the same event twice changes nothing. The package has no
// clock of its own: callers pass the time, so tests need no sleeps.
package load

import (
	"sync"
	"time"
)

// Load is a worker's predicted load in blocks.
type Load struct {
	Prefill float64
	Decode  float64
}

// Add describes a routed request.
type Add struct {
	Origin    string // router that routed it
	RequestID string
	Decode    string // decode worker id
	Prefill   string // prefill worker id, or "" when decode prefills
	// PrefillBlocks are the uncached prompt blocks; DecodeBlocks the KV
	// blocks held while decoding.
	PrefillBlocks, DecodeBlocks uint32
	// PrefillFor estimates how long the prefill takes from now.
	PrefillFor time.Duration
}

type key struct{ origin, id string }

type entry struct {
	Add
	prefillDone bool
	prefillAt   time.Time
	expiresAt   time.Time
}

func (e *entry) prefillWorker() string {
	if e.Prefill != "" {
		return e.Prefill
	}
	return e.Decode
}

// Tracker is safe for concurrent use.
type Tracker struct {
	ttl     time.Duration
	mu      sync.RWMutex
	reqs    map[key]*entry
	workers map[string]*Load
}

// New returns a tracker that forgets a request ttl after it was routed.
func New(ttl time.Duration) *Tracker {
	return &Tracker{ttl: ttl, reqs: map[key]*entry{}, workers: map[string]*Load{}}
}

// Add records a routed request at now. Adding a known request again
// replaces it.
func (t *Tracker) Add(now time.Time, a Add) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := key{a.Origin, a.RequestID}
	if old, ok := t.reqs[k]; ok {
		t.freeLocked(k, old)
	}
	e := &entry{Add: a, prefillAt: now.Add(a.PrefillFor), expiresAt: now.Add(t.ttl)}
	t.reqs[k] = e
	t.worker(e.prefillWorker()).Prefill += float64(a.PrefillBlocks)
	t.worker(a.Decode).Decode += float64(a.DecodeBlocks)
}

// PrefillDone ends a request's prefill load; it reports whether the
// request was known and still prefilling.
func (t *Tracker) PrefillDone(origin, id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.reqs[key{origin, id}]
	if !ok || e.prefillDone {
		return false
	}
	t.prefillDoneLocked(e)
	return true
}

// Free removes a request's load; it reports whether the request was known.
func (t *Tracker) Free(origin, id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := key{origin, id}
	e, ok := t.reqs[k]
	if ok {
		t.freeLocked(k, e)
	}
	return ok
}

// Expire ends the prefills whose estimate passed and forgets requests
// whose TTL passed, as of now.
func (t *Tracker) Expire(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.reqs {
		if !now.Before(e.expiresAt) {
			t.freeLocked(k, e)
		} else if !e.prefillDone && !now.Before(e.prefillAt) {
			t.prefillDoneLocked(e)
		}
	}
}

// Get writes the load of each worker in ids into out (grown as needed)
// under one lock, and returns it.
func (t *Tracker) Get(ids []string, out []Load) []Load {
	out = out[:0]
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, id := range ids {
		var l Load
		if w := t.workers[id]; w != nil {
			l = *w
		}
		out = append(out, l)
	}
	return out
}

// All returns every worker's load, for metrics.
func (t *Tracker) All() map[string]Load {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[string]Load, len(t.workers))
	for id, l := range t.workers {
		out[id] = *l
	}
	return out
}

// Len returns the number of tracked requests.
func (t *Tracker) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.reqs)
}

func (t *Tracker) worker(id string) *Load {
	w := t.workers[id]
	if w == nil {
		w = &Load{}
		t.workers[id] = w
	}
	return w
}

func (t *Tracker) prefillDoneLocked(e *entry) {
	e.prefillDone = true
	t.sub(e.prefillWorker(), float64(e.PrefillBlocks), 0)
}

func (t *Tracker) freeLocked(k key, e *entry) {
	delete(t.reqs, k)
	if !e.prefillDone {
		t.sub(e.prefillWorker(), float64(e.PrefillBlocks), 0)
	}
	t.sub(e.Decode, 0, float64(e.DecodeBlocks))
}

// sub lowers a worker's load and forgets workers whose load is back to
// zero, so departed workers do not accumulate.
func (t *Tracker) sub(id string, prefill, decode float64) {
	w := t.workers[id]
	if w == nil {
		return
	}
	w.Prefill = max(w.Prefill-prefill, 0)
	w.Decode = max(w.Decode-decode, 0)
	if w.Prefill == 0 && w.Decode == 0 {
		delete(t.workers, id)
	}
}
