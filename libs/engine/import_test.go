package engine

import (
	"context"
	"slices"
	"testing"

	"switchyard.dev/libs/engine/kvcache"
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
	copyKV(src, dst, from, to)
	src.ReleaseBlocks(regionIDs(from))
	got, err := dst.CommitImportedAfter(hashes[1], regionIDs(to), p[8:20], 0)
	if err != nil || !slices.Equal(got, regionIDs(to)) {
		t.Fatalf("commit: holding %v (imported %v), %v", got, regionIDs(to), err)
	}
	first := want.tokens[0]
	req.FirstToken = &first
	r := run(t, dst, req)
	dst.ReleaseBlocks(regionIDs(held))
	dst.ReleaseBlocks(got)
	if r.final.Usage.CachedPromptTokens != 20 || !sameTokens(r.tokens, want.tokens) {
		t.Fatalf("cached %d tokens %v want %v", r.final.Usage.CachedPromptTokens, r.tokens, want.tokens)
	}
	if m := dst.Metrics(); m.KVUsedBlocks != 0 || m.FirstTokenMismatches != 0 {
		t.Fatalf("metrics %+v", m)
	}
}

// TestImportHandsOverReferences: the importer keeps a reference on every
// committed block until it releases them after the request's first output,
// and a refused commit leaves the references with it to release; either
// way the pool ends fully free.
func TestImportHandsOverReferences(t *testing.T) {
	t.Parallel()
	dst, p, req, want, to := importPrompt(t, 6, 4)

	// Refused (a token short): nothing cached, the references still held.
	if got, err := dst.CommitImported(regionIDs(to), p[:15], 0); err == nil {
		t.Fatalf("short commit accepted, holding %v", got)
	}
	if m := dst.Metrics(); m.KVUsedBlocks != 4 || m.KVCachedBlocks != 0 {
		t.Fatalf("after a refused commit: used %d cached %d, want 4 and 0", m.KVUsedBlocks, m.KVCachedBlocks)
	}

	held, err := dst.CommitImported(regionIDs(to), p[:16], 0)
	if err != nil {
		t.Fatal(err)
	}
	if m := dst.Metrics(); m.KVUsedBlocks != 4 || m.KVCachedBlocks != 4 {
		t.Fatalf("after the commit: used %d cached %d, want the 4 imported blocks held and cached", m.KVUsedBlocks, m.KVCachedBlocks)
	}
	st, err := dst.Submit(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	first, err := st.Recv(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	dst.ReleaseBlocks(held) // the sequence holds them now
	r := collect(t, st)
	if toks := slices.Concat(first.TokenIDs, r.tokens); r.final.Usage.CachedPromptTokens != 16 || !sameTokens(toks, want.tokens) {
		t.Fatalf("cached %d tokens %v want %v", r.final.Usage.CachedPromptTokens, toks, want.tokens)
	}
	if m := dst.Metrics(); m.KVUsedBlocks != 0 {
		t.Fatalf("%d blocks still held after the request and the release", m.KVUsedBlocks)
	}

	// Aborted: releasing the import frees every block.
	to, err = dst.AllocateForImport(3)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := dst.CommitImported(regionIDs(to), p[:4], 0); err == nil {
		t.Fatalf("short commit accepted, holding %v", got)
	}
	dst.ReleaseBlocks(regionIDs(to))
	if m := dst.Metrics(); m.KVUsedBlocks != 0 {
		t.Fatalf("%d blocks still held after the abort", m.KVUsedBlocks)
	}
}

// importPrompt runs a 17-token prompt (seed) on one engine, copies its four
// full blocks into blocks newly allocated for import in a second engine and
// returns the second engine, the prompt, a request for it generating
// maxTokens, the first engine's result and the import's blocks (not yet
// committed).
func importPrompt(t *testing.T, seed, maxTokens int) (*Engine, []uint32, Request, result, []kvcache.Region) {
	t.Helper()
	b := backends()[0]
	src := start(t, Config{BlockSize: 4}, b.new(t))
	dst := start(t, Config{BlockSize: 4}, b.new(t))
	p := prompt(17, seed)
	req := Request{Prompt: p, Stop: StopParams{MaxTokens: maxTokens, IgnoreEOS: true}}
	want := run(t, src, req)
	from := src.PinPrefix(kvhash.BlockHashes(p, 4, 0))
	to, err := dst.AllocateForImport(len(from))
	if err != nil || len(from) != 4 {
		t.Fatalf("pinned %d blocks, import err %v", len(from), err)
	}
	copyKV(src, dst, from, to)
	src.ReleaseBlocks(regionIDs(from))
	return dst, p, req, want, to
}

// copyKV copies the KV of src's blocks from into dst's blocks to, as a
// transfer would.
func copyKV(src, dst *Engine, from, to []kvcache.Region) {
	sa, da := src.KV().Arena, dst.KV().Arena
	for i := range to {
		copy(da[to[i].Offset:to[i].Offset+to[i].Length], sa[from[i].Offset:from[i].Offset+from[i].Length])
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

// TestReadyHoldsRequest: a request submitted with an open Ready produces
// nothing, nor does one submitted after it, while a request already
// running goes on to its end; once Ready closes both run, with the output
// they would have had.
func TestReadyHoldsRequest(t *testing.T) {
	t.Parallel()
	b := backends()[0]
	e := start(t, Config{BlockSize: 4}, b.new(t))
	ref := start(t, Config{BlockSize: 4}, b.new(t))
	held := Request{ID: "held", Prompt: prompt(19, 3), Stop: StopParams{MaxTokens: 4, IgnoreEOS: true}}
	later := Request{ID: "later", Prompt: prompt(9, 5), Stop: StopParams{MaxTokens: 2, IgnoreEOS: true}}
	wantHeld, wantLater := run(t, ref, held), run(t, ref, later)
	running, err := e.Submit(t.Context(), Request{ID: "running", Prompt: prompt(7, 1), Stop: StopParams{MaxTokens: 12, IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := running.Recv(t.Context()); err != nil { // admitted
		t.Fatal(err)
	}
	ready := make(chan struct{})
	held.Ready = ready
	stHeld, err := e.Submit(t.Context(), held)
	if err != nil {
		t.Fatal(err)
	}
	stLater, err := e.Submit(t.Context(), later)
	if err != nil {
		t.Fatal(err)
	}
	if rest := collect(t, running); len(rest.tokens) != 11 {
		t.Fatalf("the running request got %d more tokens, want 11", len(rest.tokens))
	}
	noWait, cancel := context.WithCancel(t.Context())
	cancel()
	for name, st := range map[string]*Stream{"held": stHeld, "later": stLater} {
		if o, err := st.Recv(noWait); err == nil {
			t.Fatalf("the %s request produced %+v before Ready closed", name, o)
		}
	}
	close(ready)
	if got := collect(t, stHeld); !sameTokens(got.tokens, wantHeld.tokens) {
		t.Fatalf("held: tokens %v, want %v", got.tokens, wantHeld.tokens)
	}
	if got := collect(t, stLater); !sameTokens(got.tokens, wantLater.tokens) {
		t.Fatalf("later: tokens %v, want %v", got.tokens, wantLater.tokens)
	}
}
