package policy

import (
	"errors"
	"math"
	"testing"

	"switchyard.dev/libs/kvtier"
)

func TestCredit(t *testing.T) {
	t.Parallel()
	w := DefaultTierWeights()
	tests := []struct {
		depth [kvtier.Count]int
		want  float64
	}{
		{[kvtier.Count]int{0, 0, 0, 0}, 0},
		{[kvtier.Count]int{4, 4, 4, 4}, 4},
		{[kvtier.Count]int{0, 4, 4, 4}, 3},
		{[kvtier.Count]int{2, 4, 8, 8}, 2 + 1.5 + 1},
		{[kvtier.Count]int{0, 0, 0, 10}, 1},
	}
	for _, tt := range tests {
		if got := w.Credit(tt.depth); math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("Credit(%v) = %v, want %v", tt.depth, got, tt.want)
		}
	}
}

// The -tier-weights flag reads what it prints, its default included.
func TestTierWeightsFlag(t *testing.T) {
	t.Parallel()
	if got, want := DefaultTierWeights().String(), "1,0.75,0.25,0.1"; got != want {
		t.Errorf("default = %q, want %q", got, want)
	}
	for _, tc := range []struct {
		in   string
		want TierWeights
		ok   bool
	}{
		{"1,0.75,0.25,0.1", DefaultTierWeights(), true},
		{" 2, 1 ,0,0.5", TierWeights{kvtier.Device: 2, kvtier.Host: 1, kvtier.Disk: 0, kvtier.External: 0.5}, true},
		{"1,0.75,0.25", TierWeights{}, false},
		{"1,0.75,0.25,0.1,0", TierWeights{}, false},
		{"1,-1,0,0", TierWeights{}, false},
		{"1,x,0,0", TierWeights{}, false},
		{"1,NaN,0,0", TierWeights{}, false},
		{"1,1,0,+Inf", TierWeights{}, false},
		{"", TierWeights{}, false},
	} {
		var w TierWeights
		err := w.Set(tc.in)
		if (err == nil) != tc.ok || w != tc.want {
			t.Errorf("Set(%q) = %v, %v; want %v, ok %v", tc.in, w, err, tc.want, tc.ok)
		}
		if tc.ok {
			var back TierWeights
			if err := back.Set(w.String()); err != nil || back != w {
				t.Errorf("Set(%q) = %v, %v; want %v", w.String(), back, err, w)
			}
		}
	}
}

func TestPickDeterministic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		mode    string
		workers []Candidate
		req     Request
		want    string
	}{
		{"overlap wins", ModeKV, []Candidate{worker("a", 0, 0, 0, 0), worker("b", 8, 8, 8, 8), worker("c", 2, 2, 2, 2)}, Request{Blocks: 10}, "b"},
		{"device beats host", ModeKV, []Candidate{worker("a", 0, 8, 8, 8), worker("b", 8, 8, 8, 8)}, Request{Blocks: 10}, "b"},
		{"host beats disk", ModeKV, []Candidate{worker("a", 0, 0, 8, 8), worker("b", 0, 8, 8, 8)}, Request{Blocks: 10}, "b"},
		{"load breaks ties", ModeKV, []Candidate{
			{ID: "a", Depth: [kvtier.Count]int{4, 4, 4, 4}, DecodeBlocks: 30},
			{ID: "b", Depth: [kvtier.Count]int{4, 4, 4, 4}, DecodeBlocks: 10},
		}, Request{Blocks: 8}, "b"},
		{"heavy load outweighs overlap", ModeKV, []Candidate{
			{ID: "a", Depth: [kvtier.Count]int{8, 8, 8, 8}, PrefillBlocks: 100},
			{ID: "b"},
		}, Request{Blocks: 8}, "b"},
		{"least-loaded ignores overlap", ModeLeastLoaded, []Candidate{
			{ID: "a", Depth: [kvtier.Count]int{8, 8, 8, 8}, DecodeBlocks: 5},
			{ID: "b", DecodeBlocks: 1},
		}, Request{Blocks: 8}, "b"},
		{"direct", ModeDirect, []Candidate{worker("a", 8, 8, 8, 8), worker("b", 0, 0, 0, 0)}, Request{Blocks: 8, WorkerID: "b"}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, tt.mode, DefaultParams(), tt.workers...)
			for range 20 {
				if got := h.route(tt.req); got != tt.want {
					t.Fatalf("picked %s, want %s", got, tt.want)
				}
			}
		})
	}
}

// TestOwnPrefillWeight: a holder with a queue is chosen over an idle
// worker that would recompute the prompt once the request's own uncached
// blocks weigh more than the queue they would jump (weight 1: queue 60 +
// 4 uncached against 40 uncached on the idle worker, the idle one wins;
// weight 2: 60 + 8 against 80, the holder wins).
func TestOwnPrefillWeight(t *testing.T) {
	t.Parallel()
	workers := []Candidate{
		{ID: "holder", Depth: [kvtier.Count]int{36, 36, 36, 36}, PrefillBlocks: 60},
		{ID: "idle"},
	}
	for _, tt := range []struct {
		weight float64
		want   string
	}{{0, "idle"}, {1, "idle"}, {2, "holder"}, {DefaultOwnPrefillWeight, "holder"}} {
		p := DefaultParams()
		p.OwnPrefillWeight = tt.weight
		h := newHarness(t, ModeKV, p, workers...)
		if got := h.route(Request{Blocks: 40}); got != tt.want {
			t.Errorf("weight %v: picked %s, want %s", tt.weight, got, tt.want)
		}
	}
}

func TestTiesAreRandom(t *testing.T) {
	t.Parallel()
	h := newHarness(t, ModeKV, DefaultParams(), worker("a", 0, 0, 0, 0), worker("b", 0, 0, 0, 0), worker("c", 0, 0, 0, 0))
	seen := map[string]int{}
	for range 300 {
		seen[h.route(Request{Blocks: 4})]++
	}
	for _, id := range []string{"a", "b", "c"} {
		if seen[id] < 50 {
			t.Errorf("tie-break picked %s %d/300 times: %v", id, seen[id], seen)
		}
	}
}

// A burst of identical requests spreads over equal workers because each
// decision's predicted load counts against the next.
func TestBurstSpreads(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		workers []Candidate
		n       int
		want    map[string]int
	}{
		{"cold", []Candidate{worker("a", 0, 0, 0, 0), worker("b", 0, 0, 0, 0), worker("c", 0, 0, 0, 0), worker("d", 0, 0, 0, 0)}, 40, map[string]int{"a": 10, "b": 10, "c": 10, "d": 10}},
		// The cold worker's recompute of the 8 blocks weighs as much as
		// the blocks of DefaultPrefillLoadScale x DefaultOwnPrefillWeight
		// requests (8 each) held on the warm one: past that, it spreads.
		{"one warm", []Candidate{worker("a", 8, 8, 8, 8), worker("b", 0, 0, 0, 0)}, 2 * DefaultPrefillLoadScale * DefaultOwnPrefillWeight, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, ModeKV, DefaultParams(), tt.workers...)
			got := map[string]int{}
			for range tt.n {
				got[h.routeAndLoad(Request{Blocks: 8})]++
			}
			for id, n := range tt.want {
				if got[id] != n {
					t.Errorf("burst split %v, want %v", got, tt.want)
				}
			}
			for _, w := range tt.workers {
				if got[w.ID] == 0 {
					t.Errorf("worker %s got nothing of the burst: %v", w.ID, got)
				}
			}
			if tt.want == nil && got["a"] <= got["b"] {
				t.Errorf("warm worker should take more of the burst: %v", got)
			}
		})
	}
}

// At temperature > 0 the better worker wins most often but not always, and
// a higher temperature flattens the distribution.
func TestTemperatureDistribution(t *testing.T) {
	t.Parallel()
	share := func(temp float64) float64 {
		p := DefaultParams()
		p.Temperature = temp
		h := newHarness(t, ModeKV, p, worker("a", 8, 8, 8, 8), worker("b", 0, 0, 0, 0), worker("c", 0, 0, 0, 0))
		n := 0
		for range 2000 {
			if h.route(Request{Blocks: 10}) == "a" {
				n++
			}
		}
		return float64(n) / 2000
	}
	cold, warm, hot := share(0), share(0.2), share(5)
	if cold != 1 {
		t.Errorf("temperature 0: best share %v, want 1", cold)
	}
	if warm <= 0.5 || warm >= 1 {
		t.Errorf("temperature 0.2: best share %v, want in (0.5, 1)", warm)
	}
	if hot >= warm || hot < 0.3 || hot > 0.45 {
		t.Errorf("temperature 5: best share %v, want flatter than %v and near 1/3", hot, warm)
	}
}

func TestModes(t *testing.T) {
	t.Parallel()
	workers := []Candidate{worker("a", 8, 8, 8, 8), worker("b", 0, 0, 0, 0), worker("c", 0, 0, 0, 0)}
	t.Run("round-robin", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, ModeRoundRobin, DefaultParams(), workers...)
		var got string
		for range 6 {
			got += h.route(Request{Blocks: 1})
		}
		if got != "abcabc" {
			t.Errorf("round-robin order %q", got)
		}
	})
	t.Run("random", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, ModeRandom, DefaultParams(), workers...)
		seen := map[string]int{}
		for range 300 {
			seen[h.route(Request{Blocks: 1})]++
		}
		if len(seen) != 3 {
			t.Errorf("random picked only %v", seen)
		}
	})
}

func TestErrors(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	tests := []struct {
		mode string
		cs   []Candidate
		req  Request
		want error
	}{
		{ModeKV, nil, Request{Blocks: 1}, ErrNoCandidates},
		{ModeDirect, []Candidate{{ID: "a"}}, Request{}, ErrNoWorkerID},
		{ModeDirect, []Candidate{{ID: "a"}}, Request{WorkerID: "z"}, ErrWorkerNotFound},
	}
	for _, tt := range tests {
		prof, err := reg.Build(tt.mode, DefaultParams())
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := prof.Pick(&tt.req, tt.cs, nil, &Scratch{}); !errors.Is(err, tt.want) {
			t.Errorf("%s: err %v, want %v", tt.mode, err, tt.want)
		}
	}
	if _, err := reg.Build("nope", DefaultParams()); err == nil {
		t.Error("unknown mode built")
	}
	var custom Registry
	custom.RegisterMode("broken", ModeSpec{Picker: "missing"})
	if _, err := custom.Build("broken", DefaultParams()); err == nil {
		t.Error("mode with unknown picker built")
	}
}
