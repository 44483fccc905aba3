package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"

	plannerv1 "switchyard.dev/gen/switchyard/planner/v1"
	"switchyard.dev/gen/switchyard/planner/v1/plannerv1connect"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/mesh/canary"
	"switchyard.dev/libs/mesh/discovery"
)

// Roles the collector lists, in the order the snapshot shows them.
var roles = []string{
	discovery.RoleFrontend, discovery.RoleRouter, discovery.RolePrefill, discovery.RoleDecode,
	discovery.RoleKVBMController, discovery.RolePlanner,
}

// Lister is the part of discovery.Registry the collector needs.
type Lister interface {
	Instances(ctx context.Context, role string) ([]discovery.Instance, error)
}

// Config configures a Collector.
type Config struct {
	// Registry lists the mesh; nil shows no instances.
	Registry Lister
	// HTTPClient and Options make the RPC clients to workers and the
	// planner.
	HTTPClient connect.HTTPClient
	Options    []connect.ClientOption
	// Gatherer is the frontend's own metrics registry; nil shows no
	// latency.
	Gatherer prometheus.Gatherer
	// Interval between polls; default 2 s.
	Interval time.Duration
	// Timeout bounds one poll's calls (each GetLoad and the GetPlan);
	// default min(Interval, 1 s). A worker that does not answer in time
	// shows as unreachable.
	Timeout time.Duration
	// Concurrency bounds the GetLoad calls in flight; default 32.
	Concurrency int
	// History is how many latency points are kept; default 150.
	History int
	Logger  *slog.Logger
	// Now is the clock, for tests.
	Now func() time.Time
}

// Collector polls the mesh on one loop and keeps the latest snapshot.
type Collector struct {
	cfg Config

	// Owned by the poll loop.
	workers   map[string]workerv1connect.WorkerServiceClient
	planner   map[string]plannerv1connect.PlannerServiceClient
	prev      cumulative
	primed    bool
	history   []Point
	routers   map[string]routerCounts         // by router URL, the last poll's
	phases    map[string]*workerv1.TtftPhases // by worker URL, the last poll's
	breakdown *Phases                         // the last interval's, nil without requests
	seq       uint64
	fails     int

	mu  sync.Mutex
	cur *Frame
}

// Frame is one published snapshot, encoded once.
type Frame struct {
	Seq  uint64
	JSON []byte
	// next is closed when a newer frame replaces this one.
	next chan struct{}
}

// New returns a Collector; Run starts it.
func New(cfg Config) *Collector {
	if cfg.Interval <= 0 {
		cfg.Interval = 2 * time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = min(cfg.Interval, time.Second)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 32
	}
	if cfg.History <= 0 {
		cfg.History = 150
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// Load and plan answers are a few dozen bytes: gzip would only cost
	// both sides a compressor per call.
	cfg.Options = append(slices.Clone(cfg.Options), connect.WithAcceptCompression("gzip", nil, nil))
	c := &Collector{
		cfg:     cfg,
		workers: make(map[string]workerv1connect.WorkerServiceClient),
		planner: make(map[string]plannerv1connect.PlannerServiceClient),
	}
	c.cur = &Frame{JSON: []byte(`{"seq":0,"instances":[],"latency":[]}`), next: make(chan struct{})}
	return c
}

// Run polls every Interval until ctx ends, the first time at once.
func (c *Collector) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		c.Poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Latest returns the newest frame.
func (c *Collector) Latest() *Frame {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// Replaced is closed once a newer frame is published: every watcher of
// the snapshot waits on the same channel, so a new snapshot costs one
// close, whatever the number of watchers.
func (f *Frame) Replaced() <-chan struct{} { return f.next }

// Poll runs one round and publishes its snapshot. Run calls it; tests and
// benchmarks call it directly.
func (c *Collector) Poll(ctx context.Context) {
	s := c.collect(ctx)
	c.seq++
	s.Seq = c.seq
	data, err := json.Marshal(s)
	if err != nil {
		c.cfg.Logger.Error("console snapshot not encoded", "err", err)
		return
	}
	f := &Frame{Seq: s.Seq, JSON: data, next: make(chan struct{})}
	c.mu.Lock()
	old := c.cur
	c.cur = f
	c.mu.Unlock()
	close(old.next)
}

func (c *Collector) collect(ctx context.Context) Snapshot {
	now := c.cfg.Now()
	s := Snapshot{Time: now.UTC(), Instances: []Instance{}}
	ins, errs := c.list(ctx)
	s.Errors = errs
	c.loads(ctx, &s, ins)
	var planners []discovery.Instance
	for _, in := range ins {
		if in.Role == discovery.RolePlanner {
			planners = append(planners, in)
		}
	}
	markCanaries(&s, ins, planners)
	var routers []discovery.Instance
	for _, in := range ins {
		if in.Role == discovery.RoleRouter {
			routers = append(routers, in)
		}
	}
	var rerrs []string
	s.Routing, rerrs = c.routing(ctx, routers)
	s.Errors = append(s.Errors, rerrs...)
	plan, err := c.plan(ctx, planners)
	if err != nil {
		s.Errors = append(s.Errors, err.Error())
	}
	s.Plan = plan
	c.latency(now)
	s.Latency = slices.Clone(c.history)
	if len(s.Errors) > 0 {
		if c.fails%10 == 0 {
			c.cfg.Logger.Warn("console poll incomplete", "errors", strings.Join(s.Errors, "; "), "failed_rounds", c.fails+1)
		}
		c.fails++
	} else {
		c.fails = 0
	}
	return s
}

// list reads discovery, role by role.
func (c *Collector) list(ctx context.Context) ([]discovery.Instance, []string) {
	if c.cfg.Registry == nil {
		return nil, nil
	}
	var all []discovery.Instance
	var errs []string
	for _, role := range roles {
		lctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		ins, err := c.cfg.Registry.Instances(lctx, role)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Sprintf("discovery %s: %v", role, err))
			continue
		}
		discovery.SortInstances(ins)
		all = append(all, ins...)
	}
	return all, errs
}

// markCanaries marks the instances in their role's canary group: tagged
// canary, or of the version a rollout under way names (as the leading
// planner publishes it, the way frontends and routers read it).
func markCanaries(s *Snapshot, ins, planners []discovery.Instance) {
	var rs canary.Rollouts
	for _, p := range planners {
		if v, ok := p.Meta[discovery.MetaRollouts]; ok {
			rs, _ = canary.Parse(v) // malformed: no rollouts, as the routers would ignore it
			break
		}
	}
	for i, in := range ins {
		r, ok := rs[in.Role]
		s.Instances[i].Canary = in.HasTag(discovery.TagCanary) || (ok && r.Version == in.Version && r.Weight < 1)
	}
}

func isWorker(role string) bool { return role == discovery.RolePrefill || role == discovery.RoleDecode }

// loads fills s.Instances from ins, asking every worker for its load
// with at most Concurrency calls in flight, each bounded by Timeout.
func (c *Collector) loads(ctx context.Context, s *Snapshot, ins []discovery.Instance) {
	s.Instances = make([]Instance, len(ins))
	seen := make(map[string]bool, len(ins))
	sem := make(chan struct{}, c.cfg.Concurrency)
	var wg sync.WaitGroup
	var mu sync.Mutex
	phases := make(map[string]*workerv1.TtftPhases, len(ins))
	for i, in := range ins {
		s.Instances[i] = Instance{
			ID: in.ID, Role: in.Role, Model: in.Model, Version: in.Version, Address: in.Address,
			Canary: in.HasTag(discovery.TagCanary), Cordoned: in.Meta[discovery.MetaCordoned] == "1", Health: HealthPassing,
		}
		if !isWorker(in.Role) {
			continue
		}
		url := in.URL()
		seen[url] = true
		w := c.workers[url]
		if w == nil {
			w = workerv1connect.NewWorkerServiceClient(c.cfg.HTTPClient, url, c.cfg.Options...)
			c.workers[url] = w
		}
		out, meta := &s.Instances[i], in.Meta
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			lctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
			defer cancel()
			resp, err := w.GetLoad(lctx, connect.NewRequest(&workerv1.GetLoadRequest{}))
			if err != nil {
				out.Health = HealthUnreachable
				return
			}
			out.Load = loadOf(resp.Msg, meta)
			if p := resp.Msg.GetTtftPhases(); p != nil {
				mu.Lock()
				phases[url] = p
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	c.breakdown = breakdown(phases, c.phases)
	c.phases = phases
	for url := range c.workers {
		if !seen[url] {
			delete(c.workers, url) // gone from discovery: drop its client
		}
	}
}

// breakdown is the mean TTFT phases, on the workers, of the requests
// whose first token came between two polls, over every worker that
// answered both (one that restarted counts from its restart); nil
// without such a request.
func breakdown(cur, prev map[string]*workerv1.TtftPhases) *Phases {
	var n uint64
	var q, p, t, f float64
	for url, now := range cur {
		was, ok := prev[url]
		if !ok {
			continue
		}
		if now.GetRequests() < was.GetRequests() {
			was = &workerv1.TtftPhases{}
		}
		n += now.GetRequests() - was.GetRequests()
		q += now.GetQueueSeconds() - was.GetQueueSeconds()
		p += now.GetPrefillSeconds() - was.GetPrefillSeconds()
		t += now.GetTransferSeconds() - was.GetTransferSeconds()
		f += now.GetFirstDecodeSeconds() - was.GetFirstDecodeSeconds()
	}
	if n == 0 {
		return nil
	}
	k := float64(n)
	return &Phases{Requests: n, Queue: q / k, Prefill: p / k, Transfer: t / k, FirstDecode: f / k}
}

// loadOf is a GetLoad answer: the device pool and the lower tiers' use
// as the worker reports them, or, from a worker that reports only its
// pool (an older release), the lower tiers' capacities from its
// discovery meta.
func loadOf(m *workerv1.GetLoadResponse, meta map[string]string) *Load {
	used := m.GetKvBlocksUsed()
	l := &Load{
		Running: m.GetRunningRequests(), Waiting: m.GetWaitingRequests(), PendingPrefillTokens: m.GetPendingPrefillTokens(),
		KV: []Tier{{Name: "device", Used: &used, Total: m.GetKvBlocksTotal()}},
	}
	if tiers := m.GetKvTiers(); len(tiers) > 0 {
		for _, t := range tiers {
			u := t.GetBlocksUsed()
			name := t.GetTier()
			if name == "external" {
				name = "shared"
			}
			l.KV = append(l.KV, Tier{Name: name, Used: &u, Total: t.GetBlocksCapacity()})
		}
		return l
	}
	for _, t := range []struct{ name, key string }{
		{"host", discovery.MetaKVHostBlocks}, {"disk", discovery.MetaKVDiskBlocks}, {"shared", discovery.MetaKVSharedBlocks},
	} {
		if n, err := strconv.ParseUint(meta[t.key], 10, 32); err == nil && n > 0 {
			l.KV = append(l.KV, Tier{Name: t.name, Total: uint32(n)})
		}
	}
	return l
}

// plan asks the first planner that answers; the leader, if any answers,
// is preferred since only its plan is acted on.
func (c *Collector) plan(ctx context.Context, planners []discovery.Instance) (*Plan, error) {
	var best *plannerv1.GetPlanResponse
	var bestClient plannerv1connect.PlannerServiceClient
	var errs []error
	for _, in := range planners {
		p := c.planner[in.URL()]
		if p == nil {
			p = plannerv1connect.NewPlannerServiceClient(c.cfg.HTTPClient, in.URL(), c.cfg.Options...)
			c.planner[in.URL()] = p
		}
		pctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		resp, err := p.GetPlan(pctx, connect.NewRequest(&plannerv1.GetPlanRequest{}))
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("planner %s: %w", in.ID, err))
			continue
		}
		if best == nil || resp.Msg.GetLeader() {
			best, bestClient = resp.Msg, p
		}
		if best.GetLeader() {
			break
		}
	}
	if best == nil {
		return nil, errors.Join(errs...)
	}
	p := &Plan{Reason: best.GetReason(), Leader: best.GetLeader(), Pools: []Pool{}}
	if best.GetDecidedAt() != nil {
		p.DecidedAt = best.GetDecidedAt().AsTime()
	}
	for _, ps := range best.GetPools() {
		p.Pools = append(p.Pools, Pool{
			Model: ps.GetModel(), Role: ps.GetRole(), Observed: ps.GetObserved(), Desired: ps.GetDesired(),
			Rule: ps.GetRule(), Reason: ps.GetReason(), Pending: ps.GetPending(),
		})
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	ro, err := bestClient.GetRollouts(rctx, connect.NewRequest(&plannerv1.GetRolloutsRequest{}))
	if err != nil {
		// A planner older than rollouts answers Unimplemented: no rollouts.
		if connect.CodeOf(err) != connect.CodeUnimplemented {
			errs = append(errs, fmt.Errorf("planner rollouts: %w", err))
		}
		return p, errors.Join(errs...)
	}
	for _, r := range ro.Msg.GetRollouts() {
		p.Rollouts = append(p.Rollouts, RolloutView(r))
	}
	return p, nil
}

// RolloutView is r as the console shows it.
func RolloutView(r *plannerv1.Rollout) Rollout {
	side := func(s *plannerv1.RolloutSide) Side {
		return Side{Requests: s.GetRequests(), Errors: s.GetErrors(), TTFTP50: s.GetTtftP50Seconds(), TTFTP99: s.GetTtftP99Seconds(),
			ITLP50: s.GetItlP50Seconds(), ITLP99: s.GetItlP99Seconds()}
	}
	out := Rollout{Role: r.GetRole(), Version: r.GetVersion(), Weight: r.GetWeight(), Judge: r.GetJudge(), State: r.GetState(),
		Reason: r.GetReason(), Canary: side(r.GetCanary()), Baseline: side(r.GetBaseline())}
	if r.GetChangedAt() != nil {
		out.Changed = r.GetChangedAt().AsTime()
	}
	return out
}

// latency appends the interval since the previous poll to the history.
func (c *Collector) latency(now time.Time) {
	if c.cfg.Gatherer == nil {
		return
	}
	cur, err := read(c.cfg.Gatherer)
	if err != nil {
		c.cfg.Logger.Warn("console: frontend metrics not read", "err", err)
		return
	}
	if c.primed {
		p := point(now.UnixMilli(), cur, c.prev)
		p.Phases = c.breakdown
		c.history = append(c.history, p)
		if over := len(c.history) - c.cfg.History; over > 0 {
			c.history = slices.Delete(c.history, 0, over)
		}
	}
	c.prev, c.primed = cur, true
}
