package llamacpp_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/gguf"
	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/engine/llama"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/sharedtest"
	"switchyard.dev/libs/worker/engines"
	"switchyard.dev/libs/worker/engines/llamacpp"
)

// stories is stories260K converted for llama-server, with its tokenizer.
type stories struct {
	ckpt, tokPath, gguf string
	tok                 *tokenizer.BPE
}

func loadStories(t *testing.T) stories {
	t.Helper()
	dir := sharedtest.Path(t, sharedtest.Stories260K)
	s := stories{ckpt: filepath.Join(dir, "stories260K.bin"), tokPath: filepath.Join(dir, "tok512.bin"), gguf: filepath.Join(t.TempDir(), "stories260K.gguf")}
	if err := gguf.ConvertFiles(s.gguf, s.ckpt, s.tokPath, "stories260K"); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.LoadBPEFile(s.tokPath, 512)
	if err != nil {
		t.Fatal(err)
	}
	s.tok = tok
	return s
}

// server starts llama-server as a worker starts it: slots of the model's
// full context, no host prompt cache.
func (s stories) server(t *testing.T, slots string) *deptest.LlamaServer {
	t.Helper()
	return deptest.StartLlamaServer(t, s.gguf, "--parallel", slots, "--ctx-size", "2048", "--no-kv-unified", "--cache-ram", "0", "--alias", "stories260K")
}

func open(t *testing.T, s stories, url string, events bool) *llamacpp.Engine {
	t.Helper()
	e, err := llamacpp.Open(t.Context(), llamacpp.Config{URL: url, Model: "stories260K", Tokenizer: s.tok, BlockSize: 16, KVEvents: events, PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx, func(error) {}) }()
	t.Cleanup(func() { cancel(); <-done })
	return e
}

// builtin runs the built-in engine on the same checkpoint.
func builtin(t *testing.T, s stories) engines.Engine {
	t.Helper()
	exec, err := llama.Open(s.ckpt, s.tokPath, llama.Options{Name: "stories260K"})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{BlockSize: 16, NumBlocks: 256}, exec, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = eng.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; _ = eng.Close() })
	return engines.Builtin{Engine: eng}
}

// result is a whole generation as a client sees it.
type result struct {
	tokens []uint32
	text   string
	finish engine.FinishReason
	usage  engine.Usage
}

func generate(t *testing.T, e engines.Engine, r engine.Request) result {
	t.Helper()
	st, err := e.Generate(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	var res result
	for {
		o, err := st.Recv(t.Context())
		if errors.Is(err, io.EOF) {
			return res
		}
		if err != nil {
			t.Fatal(err)
		}
		res.tokens = append(res.tokens, o.TokenIDs...)
		res.text += o.Text
		if o.Finish != "" {
			if o.Err != nil {
				t.Fatalf("%s: %v", o.Finish, o.Err)
			}
			res.finish, res.usage = o.Finish, o.Usage
		}
	}
}

// The same requests on the built-in engine and on llama-server give the
// same tokens, text, finish reasons and token counts: greedy output is the
// model's, and stop conditions and limits are applied alike.
func TestSameOutputAsTheBuiltinEngine(t *testing.T) {
	t.Parallel()
	s := loadStories(t)
	lc := open(t, s, s.server(t, "2").URL, true)
	bi := builtin(t, s)
	prompt := s.tok.Encode("Once upon a time", true, false)
	long := s.tok.Encode("Lily and Tom went to the park. They saw a big dog.", true, false)
	tests := []struct {
		name string
		r    engine.Request
	}{
		{"max tokens", engine.Request{Prompt: prompt, Stop: engine.StopParams{MaxTokens: 60}}},
		{"ignore eos to the limit", engine.Request{Prompt: long, Stop: engine.StopParams{MaxTokens: 120, IgnoreEOS: true}}},
		{"stop string", engine.Request{Prompt: prompt, Stop: engine.StopParams{MaxTokens: 60, StopStrings: []string{"Lily"}}}},
		{"stop token", engine.Request{Prompt: prompt, Stop: engine.StopParams{MaxTokens: 60, StopTokenIDs: []uint32{432}}}},
		{"the context fills", engine.Request{Prompt: long, Stop: engine.StopParams{MaxTokens: 1000, IgnoreEOS: true}}},
	}
	for _, tc := range tests {
		want, got := generate(t, bi, tc.r), generate(t, lc, tc.r)
		if !slices.Equal(got.tokens, want.tokens) || got.text != want.text || got.finish != want.finish ||
			got.usage.CompletionTokens != want.usage.CompletionTokens || got.usage.PromptTokens != want.usage.PromptTokens {
			t.Errorf("%s: llama.cpp %d tokens %q (%s, %+v)\nbuilt-in %d tokens %q (%s, %+v)", tc.name,
				len(got.tokens), got.text, got.finish, got.usage, len(want.tokens), want.text, want.finish, want.usage)
		}
	}
	const ref = ", there was a little girl named Lily. She loved to play outside in the park."
	if got := generate(t, lc, tests[0].r); !strings.HasPrefix(got.text, ref) {
		t.Errorf("greedy text %q; want llama2.c's %q", got.text, ref)
	}
}

// Cancelling a stream ends it at once and frees the engine's slot: the
// engine stops generating.
func TestCancelStopsTheEngine(t *testing.T) {
	t.Parallel()
	s := loadStories(t)
	srv := s.server(t, "1")
	lc := open(t, s, srv.URL, true)
	ctx, cancel := context.WithCancel(t.Context())
	st, err := lc.Generate(ctx, engine.Request{Prompt: s.tok.Encode("Once upon a time", true, false), Stop: engine.StopParams{MaxTokens: 480, IgnoreEOS: true}})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := st.Recv(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if !processing(t, srv.URL) {
		t.Fatal("the slot is idle while its request streams")
	}
	cancel()
	for {
		o, err := st.Recv(t.Context())
		if err != nil {
			t.Fatalf("stream ended with %v before its cancelled output", err)
		}
		if o.Finish != "" {
			if o.Finish != engine.FinishCancelled || o.Usage.CompletionTokens >= 480 {
				t.Fatalf("finished %s after %d tokens; want cancelled", o.Finish, o.Usage.CompletionTokens)
			}
			break
		}
	}
	deptest.Eventually(t, 10*time.Second, "llama-server's slot to go idle", func() bool { return !processing(t, srv.URL) })
}

func processing(t *testing.T, url string) bool {
	t.Helper()
	res, err := http.Get(url + "/slots")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var slots []struct {
		IsProcessing bool `json:"is_processing"`
	}
	if err := json.NewDecoder(res.Body).Decode(&slots); err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(slots, func(s struct {
		IsProcessing bool `json:"is_processing"`
	}) bool {
		return s.IsProcessing
	})
}

// A prompt that repeats a cached prefix is served from it (usage counts
// the cached tokens, as llama-server reports them), and the synthesized
// KV events name exactly the blocks the router hashes for those tokens.
func TestCachedTokensAndKVEvents(t *testing.T) {
	t.Parallel()
	s := loadStories(t)
	lc := open(t, s, s.server(t, "2").URL, true)
	kv := lc.KV()
	start := kv.EventSeq()
	system := s.tok.Encode("Once upon a time, there was a little girl named Lily. She loved to play outside.", true, false)
	a := generate(t, lc, engine.Request{Prompt: system, Stop: engine.StopParams{MaxTokens: 8, IgnoreEOS: true}})
	if a.usage.CachedPromptTokens != 0 {
		t.Fatalf("first request: %d cached tokens", a.usage.CachedPromptTokens)
	}
	second := append(slices.Clone(system), s.tok.Encode(" One day", false, false)...)
	b := generate(t, lc, engine.Request{Prompt: second, Stop: engine.StopParams{MaxTokens: 8, IgnoreEOS: true}})
	if want := len(system); b.usage.CachedPromptTokens != want {
		t.Fatalf("second request: %d cached tokens; want the %d of the shared prefix", b.usage.CachedPromptTokens, want)
	}
	if n := lc.MirrorMismatches(); n != 0 {
		t.Fatalf("%d requests found another cache than the mirror predicted", n)
	}
	// The slot holds the second prompt and all its output but the last
	// token: the router's chain of those tokens is what the journal says.
	slot := append(slices.Clone(second), b.tokens[:len(b.tokens)-1]...)
	want := kvhash.BlockHashes(slot, 16, 0)
	got := map[uint64]bool{}
	sub := kv.Subscribe(start)
	for kv.EventSeq() > start {
		bt, err := sub.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		apply(got, bt.Events)
		if bt.Seq == kv.EventSeq() {
			break
		}
	}
	if len(got) != len(want) {
		t.Fatalf("the journal holds %d blocks; the slot %d", len(got), len(want))
	}
	for _, h := range want {
		if !got[h] {
			t.Fatalf("block %x of the slot's tokens is not in the journal", h)
		}
	}
	dumped := map[uint64]bool{}
	apply(dumped, kv.Dump().Events)
	if len(dumped) != len(want) {
		t.Fatalf("dump holds %d blocks, want %d", len(dumped), len(want))
	}
}

func apply(set map[uint64]bool, evs []kvevent.Event) {
	for _, e := range evs {
		for _, h := range e.BlockHashes {
			set[h] = e.Kind == kvevent.Stored
			if e.Kind == kvevent.Removed {
				delete(set, h)
			}
		}
		if e.Kind == kvevent.Cleared {
			clear(set)
		}
	}
}

// Open refuses, naming what to change, an engine that does not answer,
// one serving another model, and a tokenizer of another vocabulary.
func TestOpenRefuses(t *testing.T) {
	t.Parallel()
	s := loadStories(t)
	srv := s.server(t, "1")
	bytesTok, err := tokenizer.NewBytes(300)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		cfg  llamacpp.Config
		want string
	}{
		{"no answer", llamacpp.Config{URL: "http://127.0.0.1:1", Model: "stories260K", Tokenizer: s.tok, BlockSize: 16}, "does not answer"},
		{"another model", llamacpp.Config{URL: srv.URL, Model: "llama-3-8b", Tokenizer: s.tok, BlockSize: 16}, "--alias llama-3-8b"},
		{"another vocabulary", llamacpp.Config{URL: srv.URL, Model: "stories260K", Tokenizer: bytesTok, BlockSize: 16}, "512 tokens, the worker's tokenizer 300"},
		{"blocks larger than a slot", llamacpp.Config{URL: srv.URL, Model: "stories260K", Tokenizer: s.tok, BlockSize: 1024}, "-block-size"},
	}
	for _, tc := range tests {
		_, err := llamacpp.Open(t.Context(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v; want one containing %q", tc.name, err, tc.want)
		}
	}
}
