package route

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/canary"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/radix"
	"switchyard.dev/services/router/internal/load"
	"switchyard.dev/services/router/internal/policy"
)

// scratch is per-decision buffers, pooled so Route allocates little.
type scratch struct {
	hashes []uint64
	match  radix.Result
	cands  []policy.Candidate
	loads  []load.Load
	group  []int
	member []bool
	policy policy.Scratch
}

// decision is one pick among a pool.
type decision struct {
	cands  []policy.Candidate // scored survivors
	chosen int
}

func (d *decision) worker() *policy.Candidate { return &d.cands[d.chosen] }

// Route implements RouterService.Route.
func (r *Router) Route(ctx context.Context, req *connect.Request[routerv1.RouteRequest]) (*connect.Response[routerv1.RouteResponse], error) {
	res, err := r.Decide(ctx, req.Msg)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(res), nil
}

// Decide routes one request; errors are *connect.Error with precise codes.
func (r *Router) Decide(ctx context.Context, req *routerv1.RouteRequest) (*routerv1.RouteResponse, error) {
	if len(req.GetTokenIds()) == 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("token_ids is empty"))
	}
	if req.GetModel() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("model is empty"))
	}
	pools := r.pools.Load()
	mp := pools.pool(req.GetModel())
	if mp == nil || len(mp.decode) == 0 {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("no healthy decode workers serve model %q", req.GetModel()))
	}
	mode := r.cfg.Mode
	if req.GetHints().GetWorkerId() != "" {
		mode = policy.ModeDirect
	}
	s, _ := r.scratch.Get().(*scratch)
	if s == nil {
		s = new(scratch)
	}
	defer r.scratch.Put(s)
	s.hashes = kvhash.AppendBlockHashes(s.hashes[:0], kvhash.Root, req.GetTokenIds(), mp.blockSize, 0)
	hashes := s.hashes
	r.cfg.Index.MatchInto(&s.match, hashes)
	preq := policy.Request{Blocks: len(hashes), WorkerID: req.GetHints().GetWorkerId(), Exclude: req.GetExcludeInstanceIds()}

	var src prefixSource
	if mode == policy.ModeKV && r.cfg.Params.PrefixPullWeight > 0 {
		// A worker never copies the block holding the last prompt token
		// (it computes that token for its logits).
		src = findPrefixSource(mp, &s.match, preq.Exclude, (len(req.GetTokenIds())-1)/mp.blockSize)
	}
	// A request naming its worker goes there whatever its group.
	split := mode != policy.ModeDirect && r.cfg.Split != nil
	var key uint64
	if split {
		key = req.GetAffinityKey()
		if key == 0 {
			key = canary.TokensKey(req.GetTokenIds())
		}
	}
	dec, err := r.pick(r.profiles[mode], &preq, s, discovery.RoleDecode, split, key, mp.decode, mp.decodeIDs, mp.decodePos, mp.shared, src.depth)
	if err != nil {
		return nil, r.pickError(err, preq.WorkerID, pools.known)
	}
	decW := mp.decode[mp.decodePos[dec.worker().ID]]
	// One reading of the clock: the decision's time is both what the
	// worker orders by and when its predicted load starts.
	now := r.cfg.Now()
	res := &routerv1.RouteResponse{RequestBlocks: uint32(len(hashes)), Mode: mode,
		Decode:           r.worker(discovery.RoleDecode, decW),
		DecidedUnixNanos: now.UnixNano()}
	pulled := 0
	if d := dec.worker().Depth; decW.Pull && src.depth > d[kvtier.External] && src.id != decW.ID {
		srcW := mp.decode[mp.decodePos[src.id]]
		res.PrefixSource, res.PrefixSourceBlocks = &routerv1.Worker{InstanceId: srcW.ID, Address: srcW.URL}, uint32(src.depth)
		pulled = src.depth - d[kvtier.External]
	}
	appendCandidates(res, req, dec.cands)
	if r.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		// Now: the prefill pick below reuses the candidates' buffer.
		r.logDecision(ctx, req, mode, dec)
	}
	chosen := *dec.worker()
	// Pulled blocks are copied, not computed: no prefill load.
	weights := &r.cfg.Params.Weights
	if chosen.Weights != nil {
		weights = chosen.Weights
	}
	prefillID, prefillCredit := "", weights.Credit(chosen.Depth)+float64(pulled)
	uncached := len(req.GetTokenIds()) - chosen.Depth[kvtier.Device]*mp.blockSize
	if len(mp.prefill) > 0 && uncached > r.cfg.DisaggThresholdTokens {
		preqP := policy.Request{Blocks: len(hashes)}
		pd, err := r.pick(r.prefill, &preqP, s, discovery.RolePrefill, split, key, mp.prefill, mp.prefillID, mp.prefillAt, mp.shared, 0)
		if err == nil {
			p := pd.worker()
			prefillID, prefillCredit = p.ID, p.Overlap
			res.Prefill = r.worker(discovery.RolePrefill, mp.prefill[mp.prefillAt[p.ID]])
			appendCandidates(res, req, pd.cands)
		}
	}
	r.recordLoad(now, req, mp.blockSize, len(hashes), chosen.ID, prefillID, prefillCredit)
	r.approximate(chosen.ID, hashes)
	if r.metrics != nil {
		r.metrics.record(ctx, req.GetModel(), mode, chosen.ID, res.GetDecode().GetCanary(), len(hashes), chosen.Depth[kvtier.Device], chosen.Overlap)
	}
	return res, nil
}

// worker is w as a RouteResponse names it.
func (r *Router) worker(role string, w Worker) *routerv1.Worker {
	return &routerv1.Worker{InstanceId: w.ID, Address: w.URL, Version: w.Version, Canary: r.isCanary(role, w)}
}

// isCanary reports whether w is in its role's canary group now.
func (r *Router) isCanary(role string, w Worker) bool {
	return r.cfg.Split != nil && r.cfg.Split.Member(role, w.Version, w.Tagged)
}

// group narrows s.cands (one per ws, in order) to the request's canary
// or baseline group (package canary), unless every worker of that group
// is excluded: a request migrating away from a failing canary then goes
// to the other group rather than back.
func (r *Router) group(role string, key uint64, ws []Worker, exclude []string, s *scratch) {
	// Membership once per worker: Choose asks twice.
	s.member = s.member[:0]
	for i := range ws {
		s.member = append(s.member, r.isCanary(role, ws[i]))
	}
	s.group = r.cfg.Split.Choose(role, key, len(ws), func(i int) bool { return s.member[i] }, s.group)
	if len(s.group) == len(ws) {
		return
	}
	if !slices.ContainsFunc(s.group, func(i int) bool { return !slices.Contains(exclude, ws[i].ID) }) {
		return
	}
	kept := s.cands[:0]
	for _, i := range s.group { // ascending, so i >= len(kept)
		kept = append(kept, s.cands[i])
	}
	s.cands = kept
}

// pick builds the candidates of one pool (role's workers) and runs
// profile over them; with split, only over the request's canary or
// baseline group (key). sharedHolder is the model's shared tier in the
// index. peerDepth is the prefix a pull-capable candidate could copy
// from a peer (0: none).
func (r *Router) pick(profile *policy.Profile, preq *policy.Request, s *scratch, role string, split bool, key uint64, ws []Worker, ids []string, pos map[string]int, sharedHolder string, peerDepth int) (decision, error) {
	s.loads = r.loads.Get(ids, s.loads)
	s.cands = s.cands[:0]
	for i, w := range ws {
		c := policy.Candidate{ID: w.ID, PrefillBlocks: s.loads[i].Prefill, DecodeBlocks: s.loads[i].Decode, Weights: w.Weights}
		if w.Pull {
			c.PeerDepth = peerDepth
		}
		s.cands = append(s.cands, c)
	}
	shared := 0
	for _, m := range s.match.Workers {
		if i, ok := pos[m.Worker]; ok {
			s.cands[i].Depth = m.Depth
		} else if m.Worker == sharedHolder {
			shared = m.Depth[kvtier.External]
		}
	}
	if shared > 0 {
		// Every worker with the shared tier can load its prefix. Where a
		// worker holds a longer prefix across its own tiers it keeps it; a
		// prefix that alternates between its tiers and the store is
		// counted only as far as either alone reaches.
		for i := range s.cands {
			if !ws[i].Shared {
				continue
			}
			d := &s.cands[i].Depth
			d[kvtier.External] = max(d[kvtier.External], shared)
		}
	}
	if split {
		r.group(role, key, ws, preq.Exclude, s)
	}
	s.cands = exclude(s.cands, preq.Exclude)
	cands, i, err := profile.Pick(preq, s.cands, r.rng, &s.policy)
	return decision{cands: cands, chosen: i}, err
}

// prefixSource is the decode worker that holds the longest prefix of a
// request on device among those that can export it (prefix pull).
type prefixSource struct {
	id    string
	depth int
}

// findPrefixSource picks, among m's holders that can be copied from and
// are not excluded (a migrating request's failed workers), the deepest on
// device, counting at most limit blocks; ties go to the smaller id, so
// replicas and replays agree.
func findPrefixSource(mp *modelPool, m *radix.Result, exclude []string, limit int) prefixSource {
	var best prefixSource
	for _, w := range m.Workers {
		i, ok := mp.decodePos[w.Worker]
		if !ok || !mp.decode[i].Export || slices.Contains(exclude, w.Worker) {
			continue
		}
		d := min(w.Depth[kvtier.Device], limit)
		if d > best.depth || (d == best.depth && d > 0 && w.Worker < best.id) {
			best = prefixSource{id: w.Worker, depth: d}
		}
	}
	return best
}

// exclude drops the excluded workers from cs, unless that would leave none:
// a migrating request may still go back to a worker that failed it once
// rather than fail outright.
func exclude(cs []policy.Candidate, ids []string) []policy.Candidate {
	if len(ids) == 0 {
		return cs
	}
	kept := cs[:0:0]
	for _, c := range cs {
		if !slices.Contains(ids, c.ID) {
			kept = append(kept, c)
		}
	}
	if len(kept) == 0 {
		return cs
	}
	return kept
}

// appendCandidates adds cs to res unless req asked to omit candidates.
// Call it right after each pick: the next pick reuses cs's buffer.
func appendCandidates(res *routerv1.RouteResponse, req *routerv1.RouteRequest, cs []policy.Candidate) {
	if req.GetOmitCandidates() {
		return
	}
	for _, c := range cs {
		res.Candidates = append(res.Candidates, &routerv1.Candidate{InstanceId: c.ID, OverlapBlocks: uint32(c.Depth[kvtier.External]), Cost: c.Cost})
	}
}

func (r *Router) pickError(err error, workerID string, known map[string]bool) error {
	switch {
	case errors.Is(err, policy.ErrWorkerNotFound) && known[workerID]:
		return connect.NewError(connect.CodeUnavailable, fmt.Errorf("worker %q is not healthy or does not serve this model", workerID))
	case errors.Is(err, policy.ErrWorkerNotFound):
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("worker %q is unknown", workerID))
	case errors.Is(err, policy.ErrNoWorkerID):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, policy.ErrNoCandidates):
		return connect.NewError(connect.CodeUnavailable, err)
	}
	return connect.NewError(connect.CodeInternal, err)
}

// recordLoad adds the request's predicted load from now on and tells the
// peers.
func (r *Router) recordLoad(now time.Time, req *routerv1.RouteRequest, blockSize, blocks int, decodeID, prefillID string, credit float64) {
	id := req.GetRequestId()
	if id == "" {
		id = newRequestID()
	}
	out := int(req.GetHints().GetExpectedOutputTokens())
	if out == 0 {
		out = r.cfg.ExpectedOutputTokens
	}
	prefillBlocks := uint32(math.Ceil(max(float64(blocks)-credit, 0)))
	decodeBlocks := uint32((len(req.GetTokenIds()) + out + blockSize - 1) / blockSize)
	estimate := time.Duration(prefillBlocks) * r.cfg.PrefillBlockTime
	if req.GetReportsPrefillDone() {
		// The caller reports the first token: hold the prefill load until
		// then (the load TTL still bounds it if the report never comes).
		estimate = r.cfg.LoadTTL
	}
	r.loads.Add(now, load.Add{Origin: r.cfg.Self, RequestID: id, Decode: decodeID, Prefill: prefillID,
		PrefillBlocks: prefillBlocks, DecodeBlocks: decodeBlocks, PrefillFor: estimate})
	if r.cfg.Publish != nil {
		r.cfg.Publish(&routerv1.LoadEvent{Kind: routerv1.LoadEventKind_LOAD_EVENT_KIND_ADD, RequestId: id,
			DecodeWorkerId: decodeID, PrefillWorkerId: prefillID, PrefillBlocks: prefillBlocks, DecodeBlocks: decodeBlocks,
			PrefillEstimateMs: uint32(min(estimate.Milliseconds(), math.MaxUint32))})
	}
}

// approximate inserts the routed prefix for workers without KV events.
func (r *Router) approximate(worker string, hashes []uint64) {
	if r.cfg.Approx == "off" || r.cfg.Approx == "" || len(hashes) == 0 {
		return
	}
	if r.cfg.Approx != "all" {
		if set := r.approxSet.Load(); set == nil || !(*set)[worker] {
			return // the common case, decided without a lock
		}
	}
	// The index changes under approxMu too: applied outside it, an expiry
	// (Run) racing this insert could remove a block the tracker holds.
	r.approxMu.Lock()
	defer r.approxMu.Unlock()
	stored, evicted := r.approx.Insert(worker, hashes, r.cfg.Now())
	evs := []radix.Event{radix.StoredEvent(kvtier.Device, stored...)}
	if len(evicted) > 0 {
		evs = append(evs, radix.RemovedEvent(kvtier.Device, evicted...))
	}
	_ = r.cfg.Index.Apply(worker, evs...)
}

// Release implements RouterService.Release. Releasing an unknown or
// expired request succeeds: Release is idempotent.
func (r *Router) Release(_ context.Context, req *connect.Request[routerv1.ReleaseRequest]) (*connect.Response[routerv1.ReleaseResponse], error) {
	id := req.Msg.GetRequestId()
	if id == "" {
		return nil, errEmptyID()
	}
	r.endLoad(id, r.loads.Free, routerv1.LoadEventKind_LOAD_EVENT_KIND_FREE)
	return connect.NewResponse(&routerv1.ReleaseResponse{}), nil
}

// PrefillDone implements RouterService.PrefillDone: the request's prefill
// load ends now. Unknown, expired or already reported requests succeed.
func (r *Router) PrefillDone(_ context.Context, req *connect.Request[routerv1.PrefillDoneRequest]) (*connect.Response[routerv1.PrefillDoneResponse], error) {
	id := req.Msg.GetRequestId()
	if id == "" {
		return nil, errEmptyID()
	}
	r.endLoad(id, r.loads.PrefillDone, routerv1.LoadEventKind_LOAD_EVENT_KIND_PREFILL_DONE)
	return connect.NewResponse(&routerv1.PrefillDoneResponse{}), nil
}

// maxReportIDs bounds one Report (router.proto).
const maxReportIDs = 1 << 16

// Report implements RouterService.Report: PrefillDone for each of
// prefill_done_request_ids, then Release for each of released_request_ids.
// The batch is checked whole before any of it applies.
func (r *Router) Report(_ context.Context, req *connect.Request[routerv1.ReportRequest]) (*connect.Response[routerv1.ReportResponse], error) {
	done, released := req.Msg.GetPrefillDoneRequestIds(), req.Msg.GetReleasedRequestIds()
	if n := len(done) + len(released); n > maxReportIDs {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("report names %d requests, at most %d allowed", n, maxReportIDs))
	}
	for _, ids := range [][]string{done, released} {
		if slices.Contains(ids, "") {
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("report has an empty request_id"))
		}
	}
	for _, id := range done {
		r.endLoad(id, r.loads.PrefillDone, routerv1.LoadEventKind_LOAD_EVENT_KIND_PREFILL_DONE)
	}
	for _, id := range released {
		r.endLoad(id, r.loads.Free, routerv1.LoadEventKind_LOAD_EVENT_KIND_FREE)
	}
	return connect.NewResponse(&routerv1.ReportResponse{}), nil
}

// errEmptyID refuses a load report without a request id (a new error each
// time: a *connect.Error carries metadata a handler may add to).
func errEmptyID() error {
	return connect.NewError(connect.CodeInvalidArgument, errors.New("request_id is empty"))
}

// endLoad ends part of request id's predicted load with end and tells the
// peers when it took effect. Unknown or already ended ids are no-ops.
func (r *Router) endLoad(id string, end func(origin, id string) bool, kind routerv1.LoadEventKind) {
	if end(r.cfg.Self, id) && r.cfg.Publish != nil {
		r.cfg.Publish(&routerv1.LoadEvent{Kind: kind, RequestId: id})
	}
}

// logDecision logs one decision with every candidate's overlap and cost
// (debug level: it is the first thing to read when the hit ratio is low).
func (r *Router) logDecision(ctx context.Context, req *routerv1.RouteRequest, mode string, dec decision) {
	cands := make([]string, len(dec.cands))
	for i, c := range dec.cands {
		cands[i] = fmt.Sprintf("%s:depth=%d,prefill=%.0f,decode=%.0f,cost=%.0f", c.ID, c.Depth[kvtier.Device], c.PrefillBlocks, c.DecodeBlocks, c.Cost)
	}
	r.cfg.Logger.DebugContext(ctx, "route", "generation_id", req.GetRequestId(), "mode", mode,
		"tokens", len(req.GetTokenIds()), "chosen", dec.worker().ID, "candidates", cands)
}
