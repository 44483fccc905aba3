package routesim

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard.dev/libs/sharedtest"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/sim"
	"switchyard.dev/libs/mooncake"
	"switchyard.dev/services/router/internal/policy"
)

// prompt returns n tokens: the first shared of them are the same for every
// caller with the same group, the rest unique to (group, id).
func prompt(group, id uint32, shared, n int) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		if i < shared {
			p[i] = 300 + uint32(mooncake.Mix64(uint64(group)<<32|uint64(i))%30000)
		} else {
			p[i] = 300 + uint32(mooncake.Mix64(uint64(group)<<48|uint64(id)<<32|uint64(i))%30000)
		}
	}
	return p
}

// conversations is a workload where each of convs conversations sends
// turns requests, each turn's prompt extending the last one's by 600
// tokens, one arrival every gap.
func conversations(convs, turns int, gap time.Duration) []Request {
	var out []Request
	at := time.Duration(0)
	for t := range turns {
		for c := range convs {
			n := 600 * (t + 1)
			out = append(out, Request{At: at, Prompt: prompt(uint32(c), 0, n, n), Output: 20})
			at += gap
		}
	}
	return out
}

func run(t *testing.T, cfg Config, reqs []Request) *Result {
	t.Helper()
	res, err := Run(t.Context(), cfg, slices.Values(reqs))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Requests) != len(reqs) {
		t.Fatalf("%d outcomes for %d requests", len(res.Requests), len(reqs))
	}
	return res
}

// stepTime is the sim's time of a prefill-only step of n tokens.
func stepTime(n int) time.Duration {
	return sim.Polynomial{}.StepTime(&executor.Batch{PrefillTokens: n})
}

func TestLoneRequestTakesItsModelledTime(t *testing.T) {
	t.Parallel()
	// 1,000 tokens on an idle worker: a 512-token step, then a 488-token
	// step that samples the first token; nothing else runs.
	res := run(t, Config{Workers: 2}, []Request{{At: time.Second, Prompt: prompt(1, 1, 0, 1000), Output: 1}})
	o := res.Requests[0]
	if want := stepTime(512) + stepTime(488); o.TTFT != want {
		t.Fatalf("TTFT %v, want %v", o.TTFT, want)
	}
	if o.PromptTokens != 1000 || o.CachedTokens != 0 || o.Queue != 0 || o.PulledBlocks != 0 || res.Failed != 0 {
		t.Fatalf("outcome %+v, failed %d: want no wait and nothing pulled", o, res.Failed)
	}
	if want := time.Second + o.TTFT; res.End != want {
		t.Fatalf("end %v, want %v (one token)", res.End, want)
	}
}

func TestKVRoutesAFollowUpToItsPrefix(t *testing.T) {
	t.Parallel()
	first := prompt(7, 0, 2000, 2000)
	follow := append(slices.Clone(first), prompt(7, 1, 0, 300)...)
	reqs := []Request{
		{At: 0, Prompt: first, Output: 4},
		{At: 10 * time.Second, Prompt: follow, Output: 4},
	}
	res := run(t, Config{Workers: 8}, reqs)
	a, b := res.Requests[0], res.Requests[1]
	if a.Worker != b.Worker {
		t.Fatalf("follow-up went to worker %d, its prefix is on %d", b.Worker, a.Worker)
	}
	if b.CachedTokens != 2000 {
		t.Fatalf("follow-up found %d cached tokens, want the 2,000 of its prefix", b.CachedTokens)
	}
	if b.TTFT >= a.TTFT {
		t.Fatalf("follow-up TTFT %v not below the first's %v", b.TTFT, a.TTFT)
	}
}

// TestPrefixPullSkipsABusyHolder: a follow-up turn whose prefix holder is
// busy prefilling a long prompt goes to the idle worker either way; with
// prefix pull it copies its 2,000-token prefix from the holder there and
// comes sooner than by recomputing it.
func TestPrefixPullSkipsABusyHolder(t *testing.T) {
	t.Parallel()
	first := prompt(7, 0, 2000, 2000)
	long := append(slices.Clone(first), prompt(7, 1, 0, 40000)...)
	follow := append(slices.Clone(first), prompt(7, 2, 0, 300)...)
	reqs := []Request{
		{At: 0, Prompt: first, Output: 4},
		{At: 10 * time.Second, Prompt: long, Output: 4},
		{At: 10*time.Second + time.Millisecond, Prompt: follow, Output: 4},
	}
	off := policy.DefaultParams()
	off.PrefixPullWeight = 0
	without := run(t, Config{Workers: 2, Params: off}, reqs)
	with := run(t, Config{Workers: 2}, reqs)
	for name, res := range map[string]*Result{"without pull": without, "with pull": with} {
		if res.Requests[1].Worker != res.Requests[0].Worker || res.Requests[2].Worker == res.Requests[0].Worker {
			t.Fatalf("%s: workers %d, %d, %d: want the long prompt on the holder, the follow-up on the other", name,
				res.Requests[0].Worker, res.Requests[1].Worker, res.Requests[2].Worker)
		}
	}
	w, o := with.Requests[2], without.Requests[2]
	if with.Pulls != 1 || with.PulledBlocks != 125 || w.CachedTokens != 2000 {
		t.Fatalf("with pull: %d pulls of %d blocks, %d cached tokens; want 1 of 125, 2,000", with.Pulls, with.PulledBlocks, w.CachedTokens)
	}
	if without.Pulls != 0 || o.CachedTokens != 0 {
		t.Fatalf("without pull: %d pulls, %d cached tokens", without.Pulls, o.CachedTokens)
	}
	// The copy (125 blocks at 84 µs) takes 10.5 ms; recomputing 2,000
	// tokens takes four 512-token steps.
	if w.TTFT >= o.TTFT {
		t.Fatalf("follow-up TTFT %v with pull, not below %v without", w.TTFT, o.TTFT)
	}
	// It waits for its copy on an idle worker, then prefills its own 300
	// tokens in one step.
	if copyTime := 125 * 84 * time.Microsecond; w.PulledBlocks != 125 || w.Queue != copyTime || w.TTFT != copyTime+stepTime(300) {
		t.Fatalf("with pull: %d blocks pulled, queue %v, TTFT %v; want 125, the copy's %v, then one %v step",
			w.PulledBlocks, w.Queue, w.TTFT, copyTime, stepTime(300))
	}
	if o.PulledBlocks != 0 || o.Queue != 0 {
		t.Fatalf("without pull: %d blocks pulled, queue %v; want none", o.PulledBlocks, o.Queue)
	}
}

func TestKVBeatsRoundRobinOnConversations(t *testing.T) {
	t.Parallel()
	reqs := conversations(23, 6, 60*time.Millisecond)
	kv := run(t, Config{Workers: 4, Mode: policy.ModeKV}, reqs)
	rr := run(t, Config{Workers: 4, Mode: policy.ModeRoundRobin}, reqs)
	// Every turn but the first of each conversation could reuse all but
	// its last 600 tokens.
	if kv.HitRatio() <= rr.HitRatio() {
		t.Fatalf("kv hit ratio %.3f not above round-robin's %.3f", kv.HitRatio(), rr.HitRatio())
	}
	if kv.MeanTTFT() >= rr.MeanTTFT() {
		t.Fatalf("kv mean TTFT %v not below round-robin's %v", kv.MeanTTFT(), rr.MeanTTFT())
	}
	for i, o := range rr.Requests {
		if o.Worker != i%4 {
			t.Fatalf("round-robin sent request %d to worker %d", i, o.Worker)
		}
	}
}

func TestSameInputsSameOutcome(t *testing.T) {
	t.Parallel()
	reqs := conversations(10, 4, 30*time.Millisecond)
	params := policy.DefaultParams()
	params.Temperature = 0.5 // sampled picks: the seed decides them
	cfg := Config{Workers: 3, Params: params, Seed: 42}
	a, b := run(t, cfg, reqs), run(t, cfg, reqs)
	if !slices.Equal(a.Requests, b.Requests) || a.End != b.End {
		t.Fatal("two replays of the same inputs differ")
	}
	cfg.Seed = 43
	if c := run(t, cfg, reqs); slices.Equal(a.Requests, c.Requests) {
		t.Fatal("another seed made every sampled pick the same: the seed is not used")
	}
}

func TestSmallCacheEvictsAndStillCompletes(t *testing.T) {
	t.Parallel()
	// 400 blocks of 16 tokens a worker: every conversation's prompt soon
	// outgrows what a worker can keep cached for it.
	reqs := conversations(8, 5, 40*time.Millisecond)
	small := run(t, Config{Workers: 2, Engine: engine.Config{NumBlocks: 400}}, reqs)
	large := run(t, Config{Workers: 2, Engine: engine.Config{NumBlocks: 40000}}, reqs)
	if small.Failed != 0 || large.Failed != 0 {
		t.Fatalf("failed: %d with 400 blocks, %d with 40,000", small.Failed, large.Failed)
	}
	if small.HitRatio() == 0 || small.HitRatio() >= large.HitRatio() {
		t.Fatalf("hit ratio %.3f with 400 blocks against %.3f with 40,000: want some hits, and fewer than without eviction",
			small.HitRatio(), large.HitRatio())
	}
}

func TestOversizedRequestsFailAloneAndTheRestRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		first Request
	}{
		// 10 blocks of 16 tokens: the engine's longest sequence is 160.
		{"prompt the worker refuses", Request{At: 0, Prompt: prompt(1, 1, 0, 160), Output: 1}},
		// Fits on admission, then grows to the whole pool: it finishes
		// at the pool's size, as an engine ends it (FinishLength).
		{"generation that outgrows the pool", Request{At: 0, Prompt: prompt(1, 1, 0, 100), Output: 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reqs := []Request{tc.first, {At: time.Millisecond, Prompt: prompt(2, 1, 0, 20), Output: 3}}
			res := run(t, Config{Workers: 1, Engine: engine.Config{NumBlocks: 10, MaxBatchTokens: 64}}, reqs)
			first, second := res.Requests[0], res.Requests[1]
			refused, wantFailed := len(tc.first.Prompt) >= 160, 0
			if refused {
				wantFailed = 1
			}
			if first.Failed() != refused || res.Failed != wantFailed {
				t.Fatalf("first %+v, %d failed; want it failed only when refused", first, res.Failed)
			}
			if second.Failed() {
				t.Fatalf("second request %+v did not run", second)
			}
			if got := len(res.TTFTs()); got != 2-res.Failed {
				t.Fatalf("%d first-token times for %d served requests", got, 2-res.Failed)
			}
		})
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	t.Parallel()
	ok := Request{At: time.Second, Prompt: []uint32{300, 301}, Output: 1}
	for _, tc := range []struct {
		name string
		cfg  Config
		reqs []Request
		want string
	}{
		{"out of order", Config{}, []Request{ok, {At: 0, Prompt: ok.Prompt}}, "before the previous one"},
		{"empty prompt", Config{}, []Request{{At: 0}}, "empty prompt"},
		{"unknown mode", Config{Mode: "nearest"}, []Request{ok}, `unknown mode "nearest"`},
		{"bad watermark", Config{Engine: engine.Config{WatermarkFraction: 1}}, []Request{ok}, "invalid config"},
		{"bad order", Config{Engine: engine.Config{PrefillOrder: "lifo"}}, []Request{ok}, `"lifo"`},
		{"negative workers", Config{Workers: -1}, []Request{ok}, "-1 workers"},
		{"negative context", Config{ContextLen: -5}, []Request{ok}, "context of -5"},
		{"negative load TTL", Config{LoadTTL: -time.Second}, []Request{ok}, "load TTL"},
		{"negative long-prefill cap", Config{Engine: engine.Config{LongPrefillTokens: -1}}, []Request{ok}, "invalid config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Run(t.Context(), tc.cfg, slices.Values(tc.reqs))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	_, err := Run(t.Context(), Config{}, slices.Values([]Request{ok, {At: 0, Prompt: ok.Prompt}}))
	if !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("error %v, want ErrOutOfOrder", err)
	}
}

func TestRunStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := Run(ctx, Config{}, slices.Values(conversations(50, 3, time.Millisecond)))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

func TestQuantile(t *testing.T) {
	t.Parallel()
	ts := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.1, 1}, {0.5, 5}, {0.9, 9}, {0.94, 10}, {0.99, 10}, {1, 10}} {
		if got := Quantile(ts, tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("Quantile of nothing is not 0")
	}
}

func TestRequestsFromRecords(t *testing.T) {
	t.Parallel()
	recs := []mooncake.Record{
		{TimestampMs: 50, InputLength: 700, OutputLength: 5000, HashIDs: []int64{1, 2}},
		{TimestampMs: 350, InputLength: 1024, OutputLength: 3, HashIDs: []int64{1, 3}},
	}
	rp := mooncake.Replay{Synth: mooncake.Synth{Vocab: 32000, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 512, Seed: 1},
		Speed: 2, MaxInputTokens: 1000, MaxOutputTokens: 2048}
	seq, err := Requests(recs, rp)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Collect(seq)
	if len(got) != 2 || got[0].At != 0 || got[1].At != 150*time.Millisecond {
		t.Fatalf("requests %d, arrivals %v: want 2, at 0 and 150ms", len(got), []time.Duration{got[0].At, got[1].At})
	}
	for i, want := range []Request{{Prompt: make([]uint32, 700), Output: 2048}, {Prompt: make([]uint32, 1000), Output: 3}} {
		if len(got[i].Prompt) != len(want.Prompt) || got[i].Output != want.Output {
			t.Errorf("request %d: %d prompt tokens, output %d; want %d and %d", i, len(got[i].Prompt), got[i].Output, len(want.Prompt), want.Output)
		}
		toks := rp.Prompt(nil, recs[i])
		for j, tok := range toks {
			if got[i].Prompt[j] != uint32(tok) {
				t.Fatalf("request %d token %d is %d, loadtest's replay sends %d", i, j, got[i].Prompt[j], tok)
			}
		}
	}
	if _, err := Requests(recs, mooncake.Replay{Synth: rp.Synth}); err == nil {
		t.Error("zero speed accepted")
	}
	if _, err := Requests(nil, rp); err == nil {
		t.Error("no records accepted")
	}
}

// TestSharedConversationPrefix replays the first 400 requests of the
// Mooncake conversation trace: on a real trace, kv must reuse more and wait
// less than round-robin.
func TestSharedConversationPrefix(t *testing.T) {
	t.Parallel()
	path := sharedtest.Path(t, sharedtest.ConversationTrace)
	recs, err := mooncake.ReadFile(path, 512, 400)
	if err != nil {
		t.Fatal(err)
	}
	rp := mooncake.Replay{Synth: mooncake.Synth{Vocab: 32000, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 512, Seed: 1},
		Speed: 1, MaxInputTokens: 129024, MaxOutputTokens: 2048}
	results := map[string]*Result{}
	for _, mode := range []string{policy.ModeKV, policy.ModeRoundRobin} {
		reqs, err := Requests(recs, rp)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(t.Context(), Config{Mode: mode}, reqs)
		if err != nil {
			t.Fatal(err)
		}
		if res.Failed != 0 || len(res.Requests) != 400 {
			t.Fatalf("%s: %d failed of %d", mode, res.Failed, len(res.Requests))
		}
		results[mode] = res
	}
	kv, rr := results[policy.ModeKV], results[policy.ModeRoundRobin]
	t.Logf("kv: mean TTFT %v, hit %.2f%%; round-robin: %v, %.2f%%", kv.MeanTTFT(), 100*kv.HitRatio(), rr.MeanTTFT(), 100*rr.HitRatio())
	if kv.HitRatio() <= rr.HitRatio() || kv.MeanTTFT() >= rr.MeanTTFT() {
		t.Fatal("kv routing did no better than round-robin on the conversation trace")
	}
}
