package route

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/radix"
	"switchyard.dev/services/router/internal/load"
	"switchyard.dev/services/router/internal/policy"
)

const bs = 4

func instances(role, model string, ids ...string) []discovery.Instance {
	var out []discovery.Instance
	for i, id := range ids {
		out = append(out, discovery.Instance{ID: id, Role: role, Model: model, Address: "127.0.0.1:" + strconv.Itoa(9100+i),
			Meta: map[string]string{"block_size": strconv.Itoa(bs)}})
	}
	return out
}

func newRouter(t testing.TB, mut func(*Config)) *Router {
	t.Helper()
	cfg := Config{Self: "r1", Index: radix.New(), Mode: policy.ModeKV, Params: policy.DefaultParams(), DefaultBlockSize: bs,
		DisaggThresholdTokens: 8, ExpectedOutputTokens: 8, PrefillBlockTime: time.Millisecond, LoadTTL: time.Minute,
		Approx: "off", ApproxTTL: time.Minute, ApproxMaxBlocks: 1000}
	if mut != nil {
		mut(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func tokens(n, seed int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(seed*100000 + i)
	}
	return out
}

// cache makes worker hold the first blocks of toks in tier.
func cache(t testing.TB, ix *radix.Index, worker string, toks []uint32, tier kvtier.Tier) {
	t.Helper()
	_ = ix.AddWorker(worker)
	if err := ix.Apply(worker, radix.StoredEvent(tier, kvhash.BlockHashes(toks, bs, 0)...)); err != nil {
		t.Fatal(err)
	}
}

func TestRouteErrors(t *testing.T) {
	t.Parallel()
	r := newRouter(t, nil)
	r.SetWorkers(instances(discovery.RoleDecode, "m", "gone", "w1"), nil)
	r.SetWorkers(instances(discovery.RoleDecode, "m", "w1"), nil)
	tests := []struct {
		name string
		req  *routerv1.RouteRequest
		code connect.Code
	}{
		{"empty tokens", &routerv1.RouteRequest{Model: "m"}, connect.CodeInvalidArgument},
		{"empty model", &routerv1.RouteRequest{TokenIds: tokens(8, 1)}, connect.CodeInvalidArgument},
		{"unknown model", &routerv1.RouteRequest{Model: "x", TokenIds: tokens(8, 1)}, connect.CodeUnavailable},
		{"direct unknown worker", &routerv1.RouteRequest{Model: "m", TokenIds: tokens(8, 1), Hints: &commonv1.Hints{WorkerId: "nope"}}, connect.CodeNotFound},
		{"direct departed worker", &routerv1.RouteRequest{Model: "m", TokenIds: tokens(8, 1), Hints: &commonv1.Hints{WorkerId: "gone"}}, connect.CodeUnavailable},
	}
	for _, tt := range tests {
		_, err := r.Decide(t.Context(), tt.req)
		if connect.CodeOf(err) != tt.code {
			t.Errorf("%s: err %v, want code %v", tt.name, err, tt.code)
		}
	}
	if _, err := r.Release(t.Context(), connect.NewRequest(&routerv1.ReleaseRequest{})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("empty release: %v", err)
	}
}

func TestRouteDecisions(t *testing.T) {
	t.Parallel()
	prompt := tokens(32, 1) // 8 blocks
	tests := []struct {
		name    string
		setup   func(t *testing.T, r *Router, ix *radix.Index)
		req     *routerv1.RouteRequest
		decode  string
		prefill string
	}{
		{"overlap wins", func(t *testing.T, r *Router, ix *radix.Index) {
			cache(t, ix, "w2", prompt, kvtier.Device)
		}, &routerv1.RouteRequest{Model: "m", TokenIds: prompt}, "w2", ""},
		{"direct", nil, &routerv1.RouteRequest{Model: "m", TokenIds: prompt, Hints: &commonv1.Hints{WorkerId: "w3"}}, "w3", ""},
		{"other model's workers ignored", func(t *testing.T, r *Router, ix *radix.Index) {
			r.SetWorkers(append(instances(discovery.RoleDecode, "m", "w1"), instances(discovery.RoleDecode, "other", "o1")...), nil)
			cache(t, ix, "o1", prompt, kvtier.Device)
		}, &routerv1.RouteRequest{Model: "m", TokenIds: prompt}, "w1", ""},
		{"disaggregated: long uncached prompt", func(t *testing.T, r *Router, ix *radix.Index) {
			r.SetWorkers(instances(discovery.RoleDecode, "m", "w1"), instances(discovery.RolePrefill, "m", "p1", "p2"))
			cache(t, ix, "p2", prompt, kvtier.Host)
		}, &routerv1.RouteRequest{Model: "m", TokenIds: prompt}, "w1", "p2"},
		{"disaggregated: short prompt stays local", func(t *testing.T, r *Router, ix *radix.Index) {
			r.SetWorkers(instances(discovery.RoleDecode, "m", "w1"), instances(discovery.RolePrefill, "m", "p1"))
		}, &routerv1.RouteRequest{Model: "m", TokenIds: tokens(6, 2)}, "w1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRouter(t, nil)
			r.SetWorkers(instances(discovery.RoleDecode, "m", "w1", "w2", "w3"), nil)
			if tt.setup != nil {
				tt.setup(t, r, r.cfg.Index)
			}
			res, err := r.Decide(t.Context(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.GetDecode().GetInstanceId() != tt.decode || res.GetPrefill().GetInstanceId() != tt.prefill {
				t.Fatalf("decode %q prefill %q, want %q %q; candidates %v", res.GetDecode().GetInstanceId(), res.GetPrefill().GetInstanceId(), tt.decode, tt.prefill, res.GetCandidates())
			}
			if res.GetDecode().GetAddress() == "" || len(res.GetCandidates()) == 0 {
				t.Fatalf("incomplete response %v", res)
			}
		})
	}
}

// A burst routed before any worker reports back spreads evenly thanks to
// predicted load; Release removes it again.
func TestBurstAndRelease(t *testing.T) {
	t.Parallel()
	r := newRouter(t, nil)
	r.SetWorkers(instances(discovery.RoleDecode, "m", "a", "b", "c", "d"), nil)
	got := map[string]int{}
	for i := range 40 {
		res, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: fmt.Sprint("q", i), Model: "m", TokenIds: tokens(32, i)})
		if err != nil {
			t.Fatal(err)
		}
		got[res.GetDecode().GetInstanceId()]++
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		if got[id] != 10 {
			t.Fatalf("burst split %v, want 10 each", got)
		}
	}
	for i := range 40 {
		if _, err := r.Release(t.Context(), connect.NewRequest(&routerv1.ReleaseRequest{RequestId: fmt.Sprint("q", i)})); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.Loads().Len(); n != 0 {
		t.Fatalf("%d requests still tracked after release", n)
	}
}

func TestApplyPeer(t *testing.T) {
	t.Parallel()
	r := newRouter(t, nil)
	n := r.ApplyPeer("r2", []*routerv1.LoadEvent{
		{Kind: routerv1.LoadEventKind_LOAD_EVENT_KIND_ADD, RequestId: "q", DecodeWorkerId: "a", PrefillBlocks: 2, DecodeBlocks: 5, PrefillEstimateMs: 1000},
		{Kind: routerv1.LoadEventKind_LOAD_EVENT_KIND_PREFILL_DONE, RequestId: "q"},
	})
	if n != 2 || r.Loads().All()["a"].Decode != 5 || r.Loads().All()["a"].Prefill != 0 {
		t.Fatalf("applied %d, loads %v", n, r.Loads().All())
	}
	if r.ApplyPeer("r2", []*routerv1.LoadEvent{{Kind: routerv1.LoadEventKind_LOAD_EVENT_KIND_FREE, RequestId: "q"}}) != 1 || r.Loads().Len() != 0 {
		t.Fatal("free not applied")
	}
}

func TestUnknownMode(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Index: radix.New(), Mode: "nope"})
	if err == nil || errors.Is(err, nil) {
		t.Fatal("unknown mode accepted")
	}
}

// A migrating request excludes the workers that failed it, in every mode,
// even the one holding its whole prefix; excluding everyone is ignored.
func TestExcludeInstanceIDs(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{policy.ModeKV, policy.ModeRoundRobin, policy.ModeRandom, policy.ModeLeastLoaded} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ix := radix.New()
			r := newRouter(t, func(c *Config) { c.Index = ix; c.Mode = mode })
			r.SetWorkers(instances(discovery.RoleDecode, "m", "a", "b", "c"), nil)
			toks := tokens(32, 7)
			cache(t, ix, "b", toks, kvtier.Device)
			for i := range 12 {
				res, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: fmt.Sprint("x", i), Model: "m", TokenIds: toks,
					ExcludeInstanceIds: []string{"b", "c"}})
				if err != nil {
					t.Fatal(err)
				}
				if id := res.GetDecode().GetInstanceId(); id != "a" {
					t.Fatalf("routed to excluded %q", id)
				}
			}
			res, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: "all", Model: "m", TokenIds: toks,
				ExcludeInstanceIds: []string{"a", "b", "c"}})
			if err != nil || res.GetDecode().GetInstanceId() == "" {
				t.Fatalf("excluding every worker: %v, %v; want the exclusion ignored", res, err)
			}
		})
	}
}

// A caller that reports the first token keeps its request's prefill load
// counted past the estimate, until PrefillDone; the decode load stays
// until Release. Without the report the estimate ends it.
func TestPrefillDone(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	var published []*routerv1.LoadEvent
	r := newRouter(t, func(c *Config) {
		c.Now = func() time.Time { return now }
		c.Publish = func(ev *routerv1.LoadEvent) { published = append(published, ev) }
	})
	r.SetWorkers(instances(discovery.RoleDecode, "m", "a"), nil)
	for _, reports := range []bool{false, true} {
		id := fmt.Sprint("q-", reports)
		if _, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: id, Model: "m", TokenIds: tokens(32, 1), ReportsPrefillDone: reports}); err != nil {
			t.Fatal(err)
		}
	}
	prefill := func() float64 { return r.Loads().All()["a"].Prefill }
	if got := prefill(); got != 16 { // 8 uncached blocks each
		t.Fatalf("prefill load %v, want 16", got)
	}
	now = now.Add(time.Second) // far past the 8 ms estimate
	r.loads.Expire(now)
	if got := prefill(); got != 8 {
		t.Fatalf("after the estimate: prefill load %v, want 8 (the reporting request's)", got)
	}
	if _, err := r.PrefillDone(t.Context(), connect.NewRequest(&routerv1.PrefillDoneRequest{RequestId: "q-true"})); err != nil {
		t.Fatal(err)
	}
	if got, dec := prefill(), r.Loads().All()["a"].Decode; got != 0 || dec == 0 {
		t.Fatalf("after PrefillDone: prefill %v decode %v, want 0 and the decode load kept", got, dec)
	}
	if last := published[len(published)-1]; last.GetKind() != routerv1.LoadEventKind_LOAD_EVENT_KIND_PREFILL_DONE || last.GetRequestId() != "q-true" {
		t.Fatalf("peers were told %v", last)
	}
	// Repeated, unknown and empty ids.
	if _, err := r.PrefillDone(t.Context(), connect.NewRequest(&routerv1.PrefillDoneRequest{RequestId: "q-true"})); err != nil {
		t.Fatal(err)
	}
	if _, err := r.PrefillDone(t.Context(), connect.NewRequest(&routerv1.PrefillDoneRequest{})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("empty request id: %v", err)
	}
}

// Candidates are listed unless the caller opts out; the decision is the
// same either way.
func TestOmitCandidates(t *testing.T) {
	t.Parallel()
	ix := radix.New()
	r := newRouter(t, func(c *Config) { c.Index = ix })
	r.SetWorkers(instances(discovery.RoleDecode, "m", "w1", "w2", "w3"), nil)
	prompt := tokens(32, 1)
	cache(t, ix, "w2", prompt, kvtier.Device)
	for _, omit := range []bool{false, true} {
		res, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: fmt.Sprint(omit), Model: "m", TokenIds: prompt, OmitCandidates: omit})
		if err != nil {
			t.Fatal(err)
		}
		want := 3
		if omit {
			want = 0
		}
		if got := len(res.GetCandidates()); got != want || res.GetDecode().GetInstanceId() != "w2" {
			t.Errorf("omit=%v: %d candidates, decode %s; want %d and w2", omit, got, res.GetDecode().GetInstanceId(), want)
		}
	}
}

// Report applies a batch as the single calls would, prefill-done ids
// first, and checks the whole batch before applying any of it.
func TestReport(t *testing.T) {
	t.Parallel()
	var published []*routerv1.LoadEvent
	r := newRouter(t, func(c *Config) {
		c.Publish = func(ev *routerv1.LoadEvent) { published = append(published, ev) }
	})
	r.SetWorkers(instances(discovery.RoleDecode, "m", "a"), nil)
	for _, id := range []string{"p", "q", "s"} {
		if _, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: id, Model: "m", TokenIds: tokens(32, 1), ReportsPrefillDone: true}); err != nil {
			t.Fatal(err)
		}
	}
	workerLoad := func() load.Load { return r.Loads().All()["a"] }
	if l := workerLoad(); l.Prefill != 24 || l.Decode == 0 {
		t.Fatalf("load %+v before the report", l)
	}
	decodeEach := workerLoad().Decode / 3
	published = nil // the three adds
	for _, bad := range []*routerv1.ReportRequest{
		{PrefillDoneRequestIds: []string{"p", ""}},
		{ReleasedRequestIds: []string{""}},
		{ReleasedRequestIds: make([]string, maxReportIDs+1)},
	} {
		if _, err := r.Report(t.Context(), connect.NewRequest(bad)); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Fatalf("report %d/%d ids: %v, want InvalidArgument", len(bad.PrefillDoneRequestIds), len(bad.ReleasedRequestIds), err)
		}
	}
	if l := workerLoad(); l.Prefill != 24 || len(published) != 0 {
		t.Fatalf("a rejected report applied: load %+v, published %v", l, published)
	}
	// p: prefilled; q: prefilled and ended in one batch; s: untouched;
	// "unknown" and the repeated "p" succeed and change nothing.
	_, err := r.Report(t.Context(), connect.NewRequest(&routerv1.ReportRequest{
		PrefillDoneRequestIds: []string{"p", "q", "p", "unknown"}, ReleasedRequestIds: []string{"q", "unknown"}}))
	if err != nil {
		t.Fatal(err)
	}
	if l := workerLoad(); l.Prefill != 8 || l.Decode != 2*decodeEach {
		t.Fatalf("load %+v after the report, want prefill 8 (s) and the decode of p and s", l)
	}
	var kinds []string
	for _, ev := range published {
		kinds = append(kinds, ev.GetRequestId()+":"+ev.GetKind().String())
	}
	want := []string{"p:LOAD_EVENT_KIND_PREFILL_DONE", "q:LOAD_EVENT_KIND_PREFILL_DONE", "q:LOAD_EVENT_KIND_FREE"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("peers were told %v, want %v", kinds, want)
	}
}

// TestDecisionTime: every decision carries when it was made, the order a
// worker serves the requests routed to it in.
func TestDecisionTime(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_700_000_000, 5)
	r := newRouter(t, func(c *Config) { c.Now = func() time.Time { return at } })
	r.SetWorkers(instances(discovery.RoleDecode, "m", "a", "b"), nil)
	res, err := r.Decide(t.Context(), &routerv1.RouteRequest{RequestId: "x", Model: "m", TokenIds: tokens(40, 1)})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetDecidedUnixNanos() != at.UnixNano() {
		t.Fatalf("decided_unix_nanos %d, want %d", res.GetDecidedUnixNanos(), at.UnixNano())
	}
}
