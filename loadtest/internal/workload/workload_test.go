package workload

import (
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard.dev/libs/mooncake"
	"switchyard.dev/loadtest/internal/arrival"
	"switchyard.dev/loadtest/internal/dist"
)

func mustDist(t *testing.T, s string) dist.Dist {
	t.Helper()
	d, err := dist.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestReplay(t *testing.T) {
	t.Parallel()
	recs := []mooncake.Record{
		{TimestampMs: 1000, InputLength: 600, OutputLength: 50, HashIDs: []int64{0, 1}},
		{TimestampMs: 3000, InputLength: 1024, OutputLength: 7, HashIDs: []int64{0, 1}},
		{TimestampMs: 5000, InputLength: 100, OutputLength: 7, HashIDs: []int64{2}},
	}
	synth := mooncake.Synth{Vocab: 512, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 16, Seed: 1}
	src, err := NewReplay(recs, ReplayConfig{Replay: mooncake.Replay{Synth: synth, Speed: 2, MaxOutputTokens: 20}, UseTimestamps: true, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if !src.Timed() || src.Len() != 3 {
		t.Fatalf("Timed %v Len %d", src.Timed(), src.Len())
	}
	tests := []struct {
		at      time.Duration
		inLen   int
		maxToks int
	}{
		{0, 19, 20},             // ceil(600*16/512) = 19; 50 capped to 20
		{time.Second, 32, 7},    // (3000-1000)/2 ms
		{2 * time.Second, 4, 7}, // ceil(100*16/512) = 4
	}
	var toks [][]int
	for i, tt := range tests {
		s, ok := src.Next()
		if !ok {
			t.Fatalf("session %d missing", i)
		}
		turn, ok := s.Next("")
		if !ok || s.ID() != i || s.At() != tt.at || len(turn.Request.Tokens) != tt.inLen ||
			turn.InputTokens != tt.inLen || turn.Request.MaxTokens != tt.maxToks || !turn.Request.IgnoreEOS {
			t.Fatalf("session %d: at %v tokens %d max %d", i, s.At(), len(turn.Request.Tokens), turn.Request.MaxTokens)
		}
		if _, more := s.Next(""); more {
			t.Fatalf("session %d has a second turn", i)
		}
		toks = append(toks, turn.Request.Tokens)
	}
	if _, ok := src.Next(); ok {
		t.Fatal("source not exhausted")
	}
	if !slices.Equal(toks[0], toks[1][:19]) {
		t.Fatal("records with the same hash ids do not share a prefix")
	}
}

func mustWarper(t *testing.T, profile string) *mooncake.Warper {
	t.Helper()
	p, err := mooncake.ParseRateProfile(profile)
	if err != nil {
		t.Fatal(err)
	}
	return mooncake.NewWarper(p)
}

// TestReplayRateProfile checks that send times follow the profile, warped
// after --speed: the rate doubles 2 s into the replay and stops at 3 s.
func TestReplayRateProfile(t *testing.T) {
	t.Parallel()
	var recs []mooncake.Record
	for i := range 10 {
		recs = append(recs, mooncake.Record{TimestampMs: 500 + float64(i)*1000, InputLength: 10, OutputLength: 1, HashIDs: []int64{1}})
	}
	synth := mooncake.Synth{Vocab: 512, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 16, Seed: 1}
	rp := mooncake.Replay{Synth: synth, Speed: 2, Rate: mustWarper(t, "step:2s,2*step:3s,0")}
	src, err := NewReplay(recs, ReplayConfig{Replay: rp, UseTimestamps: true})
	if err != nil {
		t.Fatal(err)
	}
	// 500 ms apart at speed 2 until 2 s, 250 ms apart after; the last
	// record (4.5 s at speed 2, past the 4 s of trace the profile reaches)
	// is never sent.
	wantMs := []int{0, 500, 1000, 1500, 2000, 2250, 2500, 2750, 3000}
	if src.Len() != len(wantMs) {
		t.Fatalf("Len %d, want %d", src.Len(), len(wantMs))
	}
	for i, ms := range wantMs {
		s, ok := src.Next()
		if want := time.Duration(ms) * time.Millisecond; !ok || s.At() != want {
			t.Fatalf("session %d: ok %v at %v, want %v", i, ok, s.At(), want)
		}
	}
	if _, ok := src.Next(); ok {
		t.Fatal("the record past the end of the profile was replayed")
	}
	// Without timestamps the profile has nothing to warp: all records go.
	untimed, err := NewReplay(recs, ReplayConfig{Replay: rp})
	if err != nil || untimed.Len() != len(recs) {
		t.Fatalf("untimed replay: %v, Len %d", err, untimed.Len())
	}
}

func TestReplayRejects(t *testing.T) {
	t.Parallel()
	good := mooncake.Synth{Vocab: 512, BlockTokens: 512, ReplayBlockTokens: 512}
	if _, err := NewReplay(nil, ReplayConfig{Replay: mooncake.Replay{Synth: good, Speed: 0}}); err == nil {
		t.Error("speed 0 accepted")
	}
	if _, err := NewReplay(nil, ReplayConfig{Replay: mooncake.Replay{Synth: mooncake.Synth{Vocab: 1}, Speed: 1}}); err == nil {
		t.Error("bad synth accepted")
	}
}

func newSynth(t *testing.T, cfg SyntheticConfig) *Synthetic {
	t.Helper()
	s, err := NewSynthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func baseCfg(t *testing.T) SyntheticConfig {
	return SyntheticConfig{
		Input: mustDist(t, "uniform:50,100"), Output: mustDist(t, "fixed:8"), Turns: mustDist(t, "fixed:1"),
		PrefixPool: 1, Vocab: 1000, TokenMin: 3, Seed: 9,
	}
}

func TestSyntheticDeterministicAndShared(t *testing.T) {
	t.Parallel()
	cfg := baseCfg(t)
	cfg.SharedPrefixRatio = 0.5
	a, b := newSynth(t, cfg), newSynth(t, cfg)
	var firsts [][]int
	for range 5 {
		sa, _ := a.Next()
		sb, _ := b.Next()
		ta, _ := sa.Next("")
		tb, _ := sb.Next("")
		if !slices.Equal(ta.Request.Tokens, tb.Request.Tokens) {
			t.Fatal("same seed gave different prompts")
		}
		n := len(ta.Request.Tokens)
		if n < 50 || n > 100 || ta.InputTokens != n || ta.Request.MaxTokens != 8 {
			t.Fatalf("prompt %d tokens, InputTokens %d", n, ta.InputTokens)
		}
		for _, tok := range ta.Request.Tokens {
			if tok < 3 || tok >= 1000 {
				t.Fatalf("token %d outside vocab", tok)
			}
		}
		firsts = append(firsts, ta.Request.Tokens)
	}
	// Every prompt starts with the same shared prefix of at least 25 tokens
	// (half the smallest input) and differs after it.
	for _, p := range firsts[1:] {
		if !slices.Equal(p[:25], firsts[0][:25]) {
			t.Fatal("sessions do not share the prefix")
		}
		if slices.Equal(p[50:], firsts[0][50:min(len(p), len(firsts[0]))]) {
			t.Fatal("sessions share more than the prefix")
		}
	}
}

func TestSyntheticNoSharedPrefix(t *testing.T) {
	t.Parallel()
	src := newSynth(t, baseCfg(t))
	s1, _ := src.Next()
	s2, _ := src.Next()
	t1, _ := s1.Next("")
	t2, _ := s2.Next("")
	if slices.Equal(t1.Request.Tokens[:8], t2.Request.Tokens[:8]) {
		t.Fatal("independent sessions share a prefix")
	}
}

func TestSyntheticMultiTurnGrows(t *testing.T) {
	t.Parallel()
	cfg := baseCfg(t)
	cfg.Turns = mustDist(t, "fixed:3")
	cfg.TurnDelay = time.Second
	s, _ := newSynth(t, cfg).Next()
	var prev []int
	for i := range 3 {
		turn, ok := s.Next("ignored in completions mode")
		if !ok {
			t.Fatalf("turn %d missing", i)
		}
		p := slices.Clone(turn.Request.Tokens)
		if i > 0 {
			if !slices.Equal(p[:len(prev)], prev) || len(p) < len(prev)+8+50 {
				t.Fatalf("turn %d does not extend the previous context (%d -> %d)", i, len(prev), len(p))
			}
			if turn.Delay != time.Second {
				t.Fatalf("turn %d delay %v", i, turn.Delay)
			}
		} else if turn.Delay != 0 {
			t.Fatal("first turn has think time")
		}
		if turn.InputTokens != len(p) {
			t.Fatalf("turn %d InputTokens %d, prompt %d", i, turn.InputTokens, len(p))
		}
		prev = p
	}
	if _, ok := s.Next(""); ok {
		t.Fatal("fourth turn")
	}
}

func TestSyntheticChat(t *testing.T) {
	t.Parallel()
	cfg := baseCfg(t)
	cfg.Chat = true
	cfg.Turns = mustDist(t, "fixed:2")
	cfg.SharedPrefixRatio = 0.2
	cfg.Vocab = 0
	s, _ := newSynth(t, cfg).Next()
	t1, _ := s.Next("")
	if len(t1.Request.Messages) != 2 || t1.Request.Messages[0].Role != "system" || !t1.Request.WantReply {
		t.Fatalf("first turn messages %+v", t1.Request.Messages)
	}
	words := len(strings.Fields(t1.Request.Messages[0].Content)) + len(strings.Fields(t1.Request.Messages[1].Content))
	if words != t1.InputTokens {
		t.Fatalf("%d words, InputTokens %d", words, t1.InputTokens)
	}
	t2, _ := s.Next("the real reply")
	msgs := t2.Request.Messages
	if len(msgs) != 4 || msgs[2].Role != "assistant" || msgs[2].Content != "the real reply" || msgs[3].Role != "user" {
		t.Fatalf("second turn messages %+v", msgs)
	}
}

func TestSyntheticArrivals(t *testing.T) {
	t.Parallel()
	cfg := baseCfg(t)
	sched, err := arrival.New(arrival.Constant, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Arrivals = sched
	src := newSynth(t, cfg)
	if !src.Timed() || src.Len() != -1 {
		t.Fatal("synthetic with arrivals should be timed and unbounded")
	}
	for i := range 3 {
		s, _ := src.Next()
		if want := time.Duration(i) * 250 * time.Millisecond; s.At() != want {
			t.Fatalf("session %d at %v, want %v", i, s.At(), want)
		}
	}
}

func TestSyntheticArrivalsEnd(t *testing.T) {
	t.Parallel()
	cfg := baseCfg(t)
	sched, err := arrival.NewWarped(arrival.Constant, 10, 1, mustWarper(t, "step:1s,0"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Arrivals = sched
	src := newSynth(t, cfg)
	for i := range 11 { // 0, 100 ms, …, 1 s
		s, ok := src.Next()
		if want := time.Duration(i) * 100 * time.Millisecond; !ok || s.At() != want || s.ID() != i {
			t.Fatalf("session %d: ok %v at %v, want %v", i, ok, s.At(), want)
		}
	}
	if _, ok := src.Next(); ok {
		t.Fatal("a session arrived after the rate dropped to 0")
	}
}

func TestNewSyntheticRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		mod  func(*SyntheticConfig)
	}{
		{"ratio > 1", func(c *SyntheticConfig) { c.SharedPrefixRatio = 1.5 }},
		{"pool 0", func(c *SyntheticConfig) { c.PrefixPool = 0 }},
		{"vocab", func(c *SyntheticConfig) { c.TokenMin = c.Vocab }},
		{"no turns", func(c *SyntheticConfig) { c.Turns = dist.Dist{} }},
	}
	for _, tt := range tests {
		cfg := baseCfg(t)
		tt.mod(&cfg)
		if _, err := NewSynthetic(cfg); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
}
