package routesim

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/sim"
	"switchyard.dev/libs/trace"
	"switchyard.dev/services/router/internal/policy"
)

// prompt returns n tokens: the first shared of them are the same for every
// caller with the same group, the rest unique to (group, id).
func prompt(group, id uint32, shared, n int) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		if i < shared {
			p[i] = 300 + uint32(mix(uint64(group)<<32|uint64(i))%30000)
		} else {
			p[i] = 300 + uint32(mix(uint64(group)<<48|uint64(id)<<32|uint64(i))%30000)
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
	res, err := Run(context.Background(), cfg, slices.Values(reqs))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Requests) != len(reqs) {
		t.Fatalf("%d outcomes for %d requests", len(res.Requests), len(reqs))
	}
	return res
}

// stepMS is the sim's time of a prefill-only step of n tokens.
func stepTime(n int) time.Duration {
	return sim.Polynomial{}.StepTime(&executor.Batch{PrefillTokens: n})
}

func TestLoneRequestTakesItsModelledTime(t *testing.T) {
	// 1,000 tokens on an idle worker: a 512-token step, then a 488-token
	// step that samples the first token; nothing else runs.
	res := run(t, Config{Workers: 2}, []Request{{At: time.Second, Prompt: prompt(1, 1, 0, 1000), Output: 1}})
	o := res.Requests[0]
	if want := stepTime(512) + stepTime(488); o.TTFT != want {
		t.Fatalf("TTFT %v, want %v", o.TTFT, want)
	}
	if o.PromptTokens != 1000 || o.CachedTokens != 0 || res.Failed != 0 {
		t.Fatalf("outcome %+v, failed %d", o, res.Failed)
	}
	if want := time.Second + o.TTFT; res.End != want {
		t.Fatalf("end %v, want %v (one token)", res.End, want)
	}
}

func TestKVRoutesAFollowUpToItsPrefix(t *testing.T) {
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

func TestKVBeatsRoundRobinOnConversations(t *testing.T) {
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
	reqs := conversations(10, 4, 30*time.Millisecond)
	cfg := Config{Workers: 3, Params: policy.Params{Weights: policy.DefaultTierWeights(), PrefillLoadScale: 16, OwnPrefillWeight: 8, Temperature: 0.5}, Seed: 42}
	a, b := run(t, cfg, reqs), run(t, cfg, reqs)
	if !slices.Equal(a.Requests, b.Requests) || a.End != b.End {
		t.Fatal("two replays of the same inputs differ")
	}
}

func TestSmallCacheEvictsAndStillCompletes(t *testing.T) {
	// 400 blocks of 16 tokens per worker: every conversation's prompt
	// soon outgrows what a worker can keep cached for it.
	reqs := conversations(8, 5, 40*time.Millisecond)
	res := run(t, Config{Workers: 2, NumBlocks: 400}, reqs)
	for i, o := range res.Requests {
		if o.TTFT < 0 {
			t.Fatalf("request %d failed", i)
		}
	}
	if res.HitRatio() == 0 {
		t.Fatal("no prefix hit at all")
	}
}

func TestTooLargeFailsAloneAndTheRestRuns(t *testing.T) {
	reqs := []Request{
		{At: 0, Prompt: prompt(1, 1, 0, 100*16+1), Output: 1}, // more than 100 blocks
		{At: time.Millisecond, Prompt: prompt(2, 1, 0, 50), Output: 3},
	}
	res := run(t, Config{Workers: 1, NumBlocks: 100}, reqs)
	if res.Failed != 1 || res.Requests[0].TTFT != -1 {
		t.Fatalf("failed %d, first outcome %+v; want the oversized request failed", res.Failed, res.Requests[0])
	}
	if res.Requests[1].TTFT <= 0 {
		t.Fatalf("second request %+v did not run", res.Requests[1])
	}
	if got := res.TTFTs(); len(got) != 1 {
		t.Fatalf("TTFTs %v: the failed request counts", got)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	ok := Request{At: time.Second, Prompt: []uint32{300, 301}, Output: 1}
	for _, tc := range []struct {
		name string
		cfg  Config
		reqs []Request
		want error
	}{
		{"out of order", Config{}, []Request{ok, {At: 0, Prompt: ok.Prompt}}, ErrOutOfOrder},
		{"empty prompt", Config{}, []Request{{At: 0}}, nil},
		{"unknown mode", Config{Mode: "nearest"}, []Request{ok}, nil},
		{"bad watermark", Config{WatermarkFraction: 1}, []Request{ok}, nil},
		{"bad order", Config{PrefillOrder: "lifo"}, []Request{ok}, nil},
		{"negative workers", Config{Workers: -1}, []Request{ok}, nil},
		{"negative long-prefill cap", Config{LongPrefillTokens: -1}, []Request{ok}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Run(context.Background(), tc.cfg, slices.Values(tc.reqs))
			if err == nil {
				t.Fatal("no error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRunStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, Config{}, slices.Values(conversations(50, 3, time.Millisecond)))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
}

func TestQuantile(t *testing.T) {
	ts := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0, 1}, {0.5, 5}, {0.9, 9}, {0.99, 10}, {1, 10}} {
		if got := Quantile(ts, tc.q); got != tc.want {
			t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if Quantile(nil, 0.5) != 0 {
		t.Error("Quantile of nothing is not 0")
	}
}

func TestReplayRequests(t *testing.T) {
	recs := []trace.Record{
		{TimestampMs: 0, InputLength: 700, OutputLength: 5000, HashIDs: []int64{1, 2}},
		{TimestampMs: 300, InputLength: 1024, OutputLength: 3, HashIDs: []int64{1, 3}},
	}
	rp := Replay{Synth: trace.Synth{Vocab: 32000, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 512, Seed: 1},
		Rate: 2, MaxInputTokens: 1000, MaxOutputTokens: 2048}
	seq, err := rp.Requests(recs)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Collect(seq)
	if len(got) != 2 {
		t.Fatalf("%d requests", len(got))
	}
	if got[0].At != 0 || got[1].At != 150*time.Millisecond {
		t.Errorf("arrivals %v, %v: want 0 and 150ms at rate 2", got[0].At, got[1].At)
	}
	if len(got[0].Prompt) != 700 || len(got[1].Prompt) != 1000 {
		t.Errorf("prompt lengths %d, %d: want 700 and 1000 (capped)", len(got[0].Prompt), len(got[1].Prompt))
	}
	if got[0].Output != 2048 || got[1].Output != 3 {
		t.Errorf("outputs %d, %d: want 2048 (capped) and 3", got[0].Output, got[1].Output)
	}
	if !slices.Equal(got[0].Prompt[:512], got[1].Prompt[:512]) || slices.Equal(got[0].Prompt[512:600], got[1].Prompt[512:600]) {
		t.Error("hash id 1 should give both prompts the same first 512 tokens, and only those")
	}
	if _, err := (Replay{Synth: rp.Synth, Rate: -1}).Requests(recs); err == nil {
		t.Error("negative rate accepted")
	}
	if _, err := (Replay{}).Requests(recs); err == nil {
		t.Error("zero synth accepted")
	}
}

// TestSharedConversationPrefix replays the first 400 requests of the
// Mooncake conversation trace: on a real trace, kv must reuse more and wait
// less than round-robin.
func TestSharedConversationPrefix(t *testing.T) {
	const path = "../../../../../shared/traces/conversation_trace.jsonl"
	if _, err := os.Stat(path); err != nil {
		t.Skipf("shared trace not present (%v)", err)
	}
	recs, err := trace.ReadFile(path, 512, 400)
	if err != nil {
		t.Fatal(err)
	}
	rp := Replay{Synth: trace.Synth{Vocab: 32000, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 512, Seed: 1},
		MaxInputTokens: 129024, MaxOutputTokens: 2048}
	results := map[string]*Result{}
	for _, mode := range []string{policy.ModeKV, policy.ModeRoundRobin} {
		reqs, err := rp.Requests(recs)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(context.Background(), Config{Mode: mode}, reqs)
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
