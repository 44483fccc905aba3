package engine

import (
	"testing"

	"switchyard.dev/libs/kvhash"
)

// TestImportAfterCachedPrefix imports only the blocks after a prefix the
// destination already caches (CommitImportedAfter), emits the remote
// first token (FirstToken), and matches a local run.
func TestImportAfterCachedPrefix(t *testing.T) {
	t.Parallel()
	b := backends()[0]
	src := start(t, Config{BlockSize: 4}, b.new(t))
	dst := start(t, Config{BlockSize: 4}, b.new(t))
	p := prompt(23, 5)
	req := Request{Prompt: p, Stop: StopParams{MaxTokens: 6, IgnoreEOS: true}}
	want := run(t, src, req)
	// dst caches the first two blocks already.
	run(t, dst, Request{Prompt: p[:9], Stop: StopParams{MaxTokens: 1, IgnoreEOS: true}})
	hashes := kvhash.BlockHashes(p, 4, 0)
	held := dst.PinPrefix(hashes)
	if len(held) != 2 {
		t.Fatalf("dst holds %d blocks, want 2", len(held))
	}
	from := src.PinPrefix(hashes[2:5])
	to, err := dst.AllocateForImport(len(from))
	if err != nil || len(from) != 3 {
		t.Fatalf("pinned %d, err %v", len(from), err)
	}
	sa, da := src.KV().Arena, dst.KV().Arena
	for i := range to {
		copy(da[to[i].Offset:to[i].Offset+to[i].Length], sa[from[i].Offset:from[i].Offset+from[i].Length])
	}
	src.ReleaseBlocks(blockIDs(from))
	got, err := dst.CommitImportedAfter(hashes[1], blockIDs(to), p[8:20], 0)
	if err != nil || got[2] != hashes[4] {
		t.Fatalf("commit: %v %v", got, err)
	}
	dst.ReleaseBlocks(blockIDs(held))
	first := want.tokens[0]
	req.FirstToken = &first
	r := run(t, dst, req)
	if r.final.Usage.CachedPromptTokens != 20 || !sameTokens(r.tokens, want.tokens) {
		t.Fatalf("cached %d tokens %v want %v", r.final.Usage.CachedPromptTokens, r.tokens, want.tokens)
	}
	if m := dst.Metrics(); m.KVUsedBlocks != 0 || m.FirstTokenMismatches != 0 {
		t.Fatalf("metrics %+v", m)
	}
}

// TestFirstTokenOverride emits the given first token even when the engine
// would sample another, and counts the disagreement.
func TestFirstTokenOverride(t *testing.T) {
	t.Parallel()
	e := start(t, Config{BlockSize: 4}, backends()[0].new(t))
	req := Request{Prompt: prompt(10, 1), Stop: StopParams{MaxTokens: 3, IgnoreEOS: true}}
	want := run(t, e, req)
	other := (want.tokens[0] + 1) % 200
	req.FirstToken = &other
	r := run(t, e, req)
	if r.tokens[0] != other || e.Metrics().FirstTokenMismatches != 1 {
		t.Fatalf("tokens %v (want first %d), metrics %+v", r.tokens, other, e.Metrics())
	}
	bad := uint32(1 << 30)
	req.FirstToken = &bad
	if _, err := e.Submit(t.Context(), req); err == nil {
		t.Fatal("out-of-vocabulary first token accepted")
	}
}
