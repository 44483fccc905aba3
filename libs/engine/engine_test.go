package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/engine/sample"
	"switchyard.dev/libs/engine/sim"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
)

func TestValidation(t *testing.T) {
	t.Parallel()
	e := start(t, Config{}, backends()[0].new(t))
	ok := Request{Prompt: prompt(4, 0), Stop: StopParams{MaxTokens: 1}}
	tests := []struct {
		name string
		edit func(r *Request)
		want error
	}{
		{"empty prompt", func(r *Request) { r.Prompt = nil }, ErrEmptyPrompt},
		{"prompt too long", func(r *Request) { r.Prompt = prompt(128, 0) }, ErrPromptTooLong},
		{"zero max tokens", func(r *Request) { r.Stop.MaxTokens = 0 }, ErrInvalidMaxTokens},
		{"negative max tokens", func(r *Request) { r.Stop.MaxTokens = -3 }, ErrInvalidMaxTokens},
		{"token out of vocab", func(r *Request) { r.Prompt = []uint32{5, 300} }, ErrTokenOutOfRange},
		{"stop token out of vocab", func(r *Request) { r.Stop.StopTokenIDs = []uint32{9999} }, ErrTokenOutOfRange},
		{"empty stop string", func(r *Request) { r.Stop.StopStrings = []string{""} }, ErrInvalidStop},
		{"too many stop strings", func(r *Request) { r.Stop.StopStrings = slices.Repeat([]string{"x"}, MaxStopStrings+1) }, ErrInvalidStop},
		{"stop string too long", func(r *Request) { r.Stop.StopStrings = []string{strings.Repeat("x", MaxStopStringBytes+1)} }, ErrInvalidStop},
		{"too many stop tokens", func(r *Request) { r.Stop.StopTokenIDs = make([]uint32, MaxStopTokenIDs+1) }, ErrInvalidStop},
		{"bad temperature", func(r *Request) { r.Sampling.Temperature = -1 }, ErrInvalidSampling},
		{"bad top_p", func(r *Request) { r.Sampling.TopP = 2 }, ErrInvalidSampling},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := ok
			r.Prompt = append([]uint32(nil), ok.Prompt...)
			tc.edit(&r)
			_, err := e.Submit(t.Context(), r)
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if m := e.Metrics(); m.KVUsedBlocks != 0 || m.Waiting != 0 {
		t.Fatalf("invalid requests touched state: %+v", m)
	}
}

func TestStopConditions(t *testing.T) {
	t.Parallel()
	// The sim's output is printable text, a pure function of the seed.
	e := start(t, Config{}, backends()[1].new(t))
	base := Request{Prompt: prompt(8, 0), Stop: StopParams{MaxTokens: 40}, Sampling: sample.Params{Seed: seed(9)}}
	full := run(t, e, base)
	if full.final.Finish != FinishLength || len(full.tokens) != 40 || full.final.Usage.CompletionTokens != 40 {
		t.Fatalf("max tokens: %+v, %d tokens", full.final, len(full.tokens))
	}
	stop := full.text[20:23]
	cut := strings.Index(full.text, stop)
	r := base
	r.Stop.StopStrings = []string{"\x00never", stop}
	got := run(t, e, r)
	if got.final.Finish != FinishStop || got.text != full.text[:cut] {
		t.Fatalf("stop string %q: finish %q text %q, want %q", stop, got.final.Finish, got.text, full.text[:cut])
	}
	r = base
	r.Stop.StopTokenIDs = []uint32{full.tokens[5]}
	got = run(t, e, r)
	first := 0
	for first < len(full.tokens) && full.tokens[first] != full.tokens[5] {
		first++
	}
	if got.final.Finish != FinishStop || !sameTokens(got.tokens, full.tokens[:first]) || got.final.Usage.CompletionTokens != first+1 {
		t.Fatalf("stop token: finish %q tokens %v usage %+v", got.final.Finish, got.tokens, got.final.Usage)
	}
}

func TestTextStreamHoldsStopPrefix(t *testing.T) {
	t.Parallel()
	s, _ := sim.New(sim.Config{VocabSize: 300})
	ts := tokenizer.NewTextStream(s.Tokenizer(), 0, []string{"END"})
	var out string
	for _, c := range []byte("abcENxyzEND tail") {
		text, stopped := ts.Push(uint32(c) + 3)
		out += text
		if stopped {
			break
		}
	}
	if out != "abcENxyz" {
		t.Fatalf("out = %q", out)
	}
	utf := tokenizer.NewTextStream(s.Tokenizer(), 0, nil)
	if text, _ := utf.Push(0xC3 + 3); text != "" {
		t.Fatalf("emitted half a code point: %q", text)
	}
	if text, _ := utf.Push(0xA9 + 3); text != "é" {
		t.Fatalf("got %q", text)
	}
	// Bytes that can never be UTF-8 come out as U+FFFD, never raw.
	for _, b := range []byte{0x80, 0xFF, 0xC3, 'a', 0xE2} {
		text, _ := utf.Push(uint32(b) + 3)
		out += text
	}
	if out += utf.Flush(); out != "abcENxyz\uFFFD\uFFFD\uFFFDa\uFFFD" {
		t.Fatalf("invalid bytes: %q", out)
	}
}

func TestCancelFreesBlocks(t *testing.T) {
	t.Parallel()
	ex, _ := sim.New(sim.Config{VocabSize: 300, ContextLen: 4096, SpeedUp: 1000})
	e := start(t, Config{}, ex)
	ctx, cancel := context.WithCancel(t.Context())
	st, err := e.Submit(ctx, Request{Prompt: prompt(100, 0), Stop: StopParams{MaxTokens: 3000}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(t.Context()); err != nil {
		t.Fatal(err)
	}
	cancel()
	r := collect(t, st)
	if r.final.Finish != FinishCancelled || !errors.Is(r.final.Err, context.Canceled) {
		t.Fatalf("final %+v", r.final)
	}
	if m := e.Metrics(); m.KVUsedBlocks != 0 || m.Running != 0 {
		t.Fatalf("blocks not freed: %+v", m)
	}
	st2, _ := e.Submit(t.Context(), Request{Prompt: prompt(10, 1), Stop: StopParams{MaxTokens: 3000}})
	st2.Cancel()
	if r := collect(t, st2); r.final.Finish != FinishCancelled {
		t.Fatalf("Stream.Cancel: %+v", r.final)
	}
}

func TestKVEventsAndDump(t *testing.T) {
	t.Parallel()
	e := start(t, Config{BlockSize: 4}, backends()[0].new(t))
	sub := e.Subscribe(0)
	p := prompt(18, 2)
	run(t, e, Request{Prompt: p, Stop: StopParams{MaxTokens: 3, IgnoreEOS: true}})
	cached := map[uint64]bool{}
	var last uint64
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for len(cached) < 5 { // 20 tokens computed (18 + 2 fed back): 5 full blocks
		b, err := sub.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b.Seq <= last {
			t.Fatalf("sequence went from %d to %d", last, b.Seq)
		}
		last = b.Seq
		for _, ev := range b.Events {
			if ev.Kind == kvevent.Stored {
				if len(ev.TokenIDs) != len(ev.BlockHashes)*4 || ev.BlockSize != 4 || ev.Tier != kvtier.Device {
					t.Fatalf("bad stored event %+v", ev)
				}
				for _, h := range ev.BlockHashes {
					cached[h] = true
				}
			}
		}
	}
	want := kvhash.BlockHashes(p, 4, 0)
	for _, h := range want {
		if !cached[h] {
			t.Fatalf("prompt block %#x not reported", h)
		}
	}
	d := e.Dump()
	if d.Seq != last || len(d.Events) != len(cached) {
		t.Fatalf("dump seq %d (want %d), %d events (want %d)", d.Seq, last, len(d.Events), len(cached))
	}
	seen := map[uint64]bool{kvhash.Root: true}
	for _, ev := range d.Events {
		if !seen[ev.ParentHash] {
			t.Fatal("dump lists a child before its parent")
		}
		seen[ev.BlockHashes[0]] = true
	}
	e.ClearPrefixCache()
	b, err := sub.Next(ctx)
	if err != nil || b.Events[0].Kind != kvevent.Cleared {
		t.Fatalf("after clear: %+v, %v", b, err)
	}
}

func TestEventGap(t *testing.T) {
	t.Parallel()
	e := start(t, Config{BlockSize: 4, EventBuffer: 2}, backends()[1].new(t))
	for i := range 4 {
		run(t, e, Request{Prompt: prompt(9, i), Stop: StopParams{MaxTokens: 1}})
	}
	if _, err := e.Subscribe(0).Next(t.Context()); !errors.Is(err, kvevent.ErrGap) {
		t.Fatalf("err = %v, want ErrGap", err)
	}
	d := e.Dump()
	if len(d.Events) != 8 {
		t.Fatalf("dump has %d blocks, want 8", len(d.Events))
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	ex, _ := sim.New(sim.Config{VocabSize: 300, ContextLen: 100000, SpeedUp: 100})
	e, err := New(Config{NumBlocks: 8000}, ex, nil)
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Submit(t.Context(), Request{Prompt: prompt(4, 0), Stop: StopParams{MaxTokens: 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = e.Run(ctx) }()
	if _, err := st.Recv(t.Context()); err != nil {
		t.Fatal(err)
	}
	for !e.running.Load() {
		time.Sleep(time.Millisecond)
	}
	if err := e.Run(ctx); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Run = %v", err)
	}
	if err := e.Close(); !errors.Is(err, ErrStillRunning) {
		t.Fatalf("Close while running = %v", err)
	}
	cancel()
	wg.Wait()
	if r := collect(t, st); r.final.Finish != FinishError || !errors.Is(r.final.Err, ErrStopped) {
		t.Fatalf("in-flight request after stop: %+v", r.final)
	}
	if _, err := e.Submit(t.Context(), Request{Prompt: prompt(4, 0), Stop: StopParams{MaxTokens: 1}}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Submit after stop = %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	idle, err := New(Config{}, backends()[1].new(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idle.Run(t.Context()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Run after Close = %v", err)
	}
	if _, err := New(Config{BlockSize: -1}, backends()[1].new(t), nil); err == nil {
		t.Fatal("negative block size accepted")
	}
}

func TestMetricsAndInfo(t *testing.T) {
	t.Parallel()
	e := start(t, Config{BlockSize: 8, NumBlocks: 40}, backends()[0].new(t))
	info := e.ModelInfo()
	if info.VocabSize != 300 || info.BlockSize != 8 || info.NumBlocks != 40 || info.ContextLen != 128 || info.EOS != 2 || info.BOS != 1 {
		t.Fatalf("info %+v", info)
	}
	run(t, e, Request{Prompt: prompt(20, 0), Stop: StopParams{MaxTokens: 5, IgnoreEOS: true}})
	run(t, e, Request{Prompt: prompt(20, 0), Stop: StopParams{MaxTokens: 5, IgnoreEOS: true}})
	m := e.Metrics()
	if m.GeneratedTokens != 10 || m.PromptTokens != 40 || m.PrefixHitTokens != 16 || m.Steps < 10 || m.KVTotalBlocks != 40 || m.KVUsage() != 0 {
		t.Fatalf("metrics %+v", m)
	}
	if m.TokensPerSecond <= 0 || m.LastStepTime <= 0 || m.KVCachedBlocks == 0 {
		t.Fatalf("rates %+v", m)
	}
}

// TestImportSeam copies a prompt's KV from one engine into another through
// the import API: the second engine then hits the prefix cache and
// produces the same output.
func TestImportSeam(t *testing.T) {
	t.Parallel()
	dst, p, req, want, to := importPrompt(t, 4, 8)
	blocks := regionIDs(to)
	got, err := dst.CommitImported(blocks, p[:16], 0)
	if err != nil || !slices.Equal(got, blocks) {
		t.Fatalf("commit: holding %v (imported %v), %v", got, blocks, err)
	}
	r := run(t, dst, req)
	dst.ReleaseBlocks(got)
	if r.final.Usage.CachedPromptTokens != 16 || !sameTokens(r.tokens, want.tokens) {
		t.Fatalf("cached %d tokens %v want %v", r.final.Usage.CachedPromptTokens, r.tokens, want.tokens)
	}
}
