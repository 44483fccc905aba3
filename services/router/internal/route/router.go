// Package route is the router's decision engine behind RouterService: it
// joins the radix index (what each worker caches), the predicted load of
// recent decisions (its own and its peers'), and the policy profiles, and
// answers Route and Release with precise Connect errors.
//
// Worker pools come from discovery as immutable snapshots swapped with one
// atomic store, so a Route never waits on a discovery update; the only
// shared state a Route writes is the load tracker (and, for workers without
// KV events, the approximate cache).
package route

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/canary"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/radix"
	"switchyard.dev/services/router/internal/approx"
	"switchyard.dev/services/router/internal/load"
	"switchyard.dev/services/router/internal/policy"
)

// Config configures a Router.
type Config struct {
	Self  string // this router's instance id (origin of its load events)
	Index *radix.Index
	// Registry builds the profiles; nil means policy.NewRegistry().
	Registry *policy.Registry
	Params   policy.Params
	Mode     string // default mode
	// DisaggThresholdTokens: with prefill workers for the model, a request
	// whose uncached prompt (on the chosen decode worker) exceeds this is
	// also given a prefill worker.
	DisaggThresholdTokens int
	DefaultBlockSize      int
	// ExpectedOutputTokens is the decode length assumed when the hints
	// give none.
	ExpectedOutputTokens int
	// PrefillBlockTime estimates the prefill time of one uncached block.
	PrefillBlockTime time.Duration
	// FixedTierWeights keeps Params.Weights for every worker; otherwise
	// a worker that publishes its measured tier load times is credited
	// from them (DerivedCredit).
	FixedTierWeights bool
	LoadTTL          time.Duration
	// Approx settings: "off", "auto" (workers answering Unimplemented) or
	// "all"; routed prefixes are kept ApproxTTL, at most ApproxMaxBlocks.
	Approx          string
	ApproxTTL       time.Duration
	ApproxMaxBlocks int
	// Split, when set, splits each request into its role's canary or
	// baseline group before the profile ranks the group's workers
	// (package canary); nil: every worker is a candidate.
	Split *canary.Split
	// Publish sends this router's load events to its peers; may be nil.
	Publish func(*routerv1.LoadEvent)
	Meter   metric.Meter
	Logger  *slog.Logger
	Now     func() time.Time
	// Source draws the tie-breaks and softmax samples; nil means the
	// runtime's generator. A simulation passes a seeded one so the same
	// inputs make the same decisions (a Source need not be safe for
	// concurrent use; then Decide must not be called concurrently).
	Source mrand.Source
}

// Router decides. It is safe for concurrent use, unless Config.Source is a
// generator that is not (then one goroutine at a time may call Decide).
type Router struct {
	cfg      Config
	profiles map[string]*policy.Profile
	prefill  *policy.Profile
	loads    *load.Tracker
	metrics  *metrics
	pools    atomic.Pointer[pools]
	rng      *mrand.Rand
	scratch  sync.Pool // *scratch

	approxMu  sync.Mutex
	approxSet atomic.Pointer[map[string]bool] // copied on write: read per decision
	approx    *approx.Tracker
}

// New builds a router; it builds every registered mode's profile.
func New(cfg Config) (*Router, error) {
	if cfg.Registry == nil {
		cfg.Registry = policy.NewRegistry()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Source == nil {
		cfg.Source = runtimeSource{}
	}
	r := &Router{cfg: cfg, profiles: map[string]*policy.Profile{}, loads: load.New(cfg.LoadTTL),
		rng: mrand.New(cfg.Source), approx: approx.New(cfg.ApproxTTL, cfg.ApproxMaxBlocks)}
	for _, m := range cfg.Registry.Modes() {
		p, err := cfg.Registry.Build(m, cfg.Params)
		if err != nil {
			return nil, err
		}
		r.profiles[m] = p
	}
	if r.profiles[cfg.Mode] == nil {
		return nil, fmt.Errorf("route: unknown mode %q (have %v)", cfg.Mode, cfg.Registry.Modes())
	}
	r.prefill = r.profiles[policy.ModeKV]
	if r.prefill == nil {
		return nil, errors.New("route: registry has no kv mode for prefill selection")
	}
	if cfg.Meter != nil {
		m, err := newMetrics(cfg.Meter, r.loads)
		if err != nil {
			return nil, fmt.Errorf("route: metrics: %w", err)
		}
		r.metrics = m
	}
	r.pools.Store(buildPools(nil, nil, cfg.DefaultBlockSize, nil, r.credit))
	return r, nil
}

// runtimeSource draws from the runtime's concurrency-safe generator.
type runtimeSource struct{}

func (runtimeSource) Uint64() uint64 { return mrand.Uint64() }

// Loads is the predicted load tracker (for peers and tests).
func (r *Router) Loads() *load.Tracker { return r.loads }

// SetWorkers publishes the current decode and prefill instances.
func (r *Router) SetWorkers(decode, prefill []discovery.Instance) {
	r.pools.Store(buildPools(decode, prefill, r.cfg.DefaultBlockSize, r.pools.Load().known, r.credit))
}

// credit is a worker's tier credits: derived from its measured load
// times unless the configuration fixes them.
func (r *Router) credit(in discovery.Instance) *policy.TierWeights {
	if r.cfg.FixedTierWeights {
		return nil
	}
	return DerivedCredit(in, r.cfg.PrefillBlockTime, r.cfg.Params.Weights)
}

// SetApprox marks a worker as sending no KV events: the router
// approximates its cache from its own decisions. What the index held for
// it (from a snapshot: another router's approximation) is dropped, as the
// approximation's TTL and size bound could never remove it.
func (r *Router) SetApprox(id string) {
	r.setApprox(id, true)
}

// ClearApprox ends approximating a worker (it left, or serves events now)
// and forgets what was approximated; its event stream, if any, resyncs the
// index.
func (r *Router) ClearApprox(id string) {
	r.setApprox(id, false)
}

func (r *Router) setApprox(id string, on bool) {
	r.approxMu.Lock()
	defer r.approxMu.Unlock()
	set := map[string]bool{}
	if old := r.approxSet.Load(); old != nil {
		maps.Copy(set, *old)
	}
	if on {
		set[id] = true
		_ = r.cfg.Index.Reset(id, nil) // an unknown worker has nothing to drop
	} else {
		delete(set, id)
	}
	r.approxSet.Store(&set)
	r.approx.Forget(id)
}

// Run expires predicted load and approximate blocks until ctx ends.
func (r *Router) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := r.cfg.Now()
		r.loads.Expire(now)
		r.approxMu.Lock() // with the index changes: see approximate
		for w, hs := range r.approx.Expire(now) {
			_ = r.cfg.Index.Apply(w, radix.RemovedEvent(kvtier.Device, hs...))
		}
		r.approxMu.Unlock()
	}
}

// ApplyPeer applies a peer router's load events and returns how many took
// effect.
func (r *Router) ApplyPeer(origin string, evs []*routerv1.LoadEvent) int {
	now, n := r.cfg.Now(), 0
	for _, ev := range evs {
		switch ev.GetKind() {
		case routerv1.LoadEventKind_LOAD_EVENT_KIND_ADD:
			r.loads.Add(now, load.Add{Origin: origin, RequestID: ev.GetRequestId(), Decode: ev.GetDecodeWorkerId(),
				Prefill: ev.GetPrefillWorkerId(), PrefillBlocks: ev.GetPrefillBlocks(), DecodeBlocks: ev.GetDecodeBlocks(),
				PrefillFor: time.Duration(ev.GetPrefillEstimateMs()) * time.Millisecond})
			n++
		case routerv1.LoadEventKind_LOAD_EVENT_KIND_PREFILL_DONE:
			if r.loads.PrefillDone(origin, ev.GetRequestId()) {
				n++
			}
		case routerv1.LoadEventKind_LOAD_EVENT_KIND_FREE:
			if r.loads.Free(origin, ev.GetRequestId()) {
				n++
			}
		}
	}
	return n
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "rt-" + hex.EncodeToString(b[:])
}
