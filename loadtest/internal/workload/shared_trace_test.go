package workload

import (
	"hash/maphash"
	"math"
	"testing"

	"switchyard.dev/libs/sharedtest"

	"switchyard.dev/libs/mooncake"
)

// TestReplayKeepsTraceReuse replays the shared conversation trace with
// 16-token blocks and checks that the synthesized prompts show the trace's
// measured infinite-cache hit ratio: block scaling keeps prefix reuse.
func TestReplayKeepsTraceReuse(t *testing.T) {
	t.Parallel()
	path := sharedtest.Path(t, sharedtest.ConversationTrace)
	if testing.Short() {
		t.Skip("replays 12k requests")
	}
	recs, err := mooncake.ReadFile(path, 512, 0)
	if err != nil {
		t.Fatal(err)
	}
	const block = 16
	src, err := NewReplay(recs, ReplayConfig{Replay: mooncake.Replay{
		Synth: mooncake.Synth{Vocab: 512, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: block, Seed: 1},
		Speed: 1,
	}})
	if err != nil {
		t.Fatal(err)
	}
	seed := maphash.MakeSeed()
	seen := map[uint64]bool{}
	var hits, blocks int
	for {
		s, ok := src.Next()
		if !ok {
			break
		}
		turn, _ := s.Next("")
		var h maphash.Hash
		h.SetSeed(seed)
		toks := turn.Request.Tokens
		for i := 0; i < len(toks); i += block {
			for _, tok := range toks[i:min(i+block, len(toks))] {
				h.WriteByte(byte(tok))
				h.WriteByte(byte(tok >> 8))
			}
			k := h.Sum64()
			blocks++
			if seen[k] {
				hits++
			}
			seen[k] = true
		}
	}
	ratio := float64(hits) / float64(blocks)
	if math.Abs(ratio-0.3664) > 0.01 {
		t.Fatalf("block hit ratio %.4f over %d blocks, want 0.3664 ± 0.01", ratio, blocks)
	}
	t.Logf("hit ratio %.4f over %d blocks", ratio, blocks)
}
