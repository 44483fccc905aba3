package engine

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"switchyard.dev/libs/engine/sample"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/llama"
	"switchyard.dev/libs/engine/sim"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/libs/sharedtest"
)

// tinyShape keeps -race runs fast; it has the stories260K architecture.
var tinyShape = llama.Config{Dim: 32, HiddenDim: 64, NLayers: 2, NHeads: 4, NKVHeads: 2, VocabSize: 300, SeqLen: 128, SharedClassifier: true}

// backend is one executor implementation under the contract tests.
type backend struct {
	name string
	new  func(t testing.TB) executor.Executor
}

func backends() []backend {
	tiny, err := llama.NewRandom(tinyShape, 7)
	if err != nil {
		panic(err)
	}
	return []backend{
		{"llama", func(t testing.TB) executor.Executor {
			tok, err := tokenizer.NewBytes(tinyShape.VocabSize)
			if err != nil {
				t.Fatal(err)
			}
			e, err := llama.New(tiny, tok, llama.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}},
		{"sim", func(t testing.TB) executor.Executor {
			e, err := sim.New(sim.Config{VocabSize: 300, ContextLen: 128})
			if err != nil {
				t.Fatal(err)
			}
			return e
		}},
	}
}

// storiesCache caches the loaded checkpoint and tokenizer across tests.
var storiesCache struct {
	once  sync.Once
	model *llama.Model
	tok   *tokenizer.BPE
	err   error
}

// stories returns an executor for stories260K (sharing one loaded model),
// or skips.
func stories(t testing.TB) executor.Executor {
	t.Helper()
	dir := sharedtest.Path(t, sharedtest.Stories260K)
	storiesCache.once.Do(func() {
		storiesCache.model, storiesCache.err = llama.LoadCheckpoint(filepath.Join(dir, "stories260K.bin"))
		if storiesCache.err == nil {
			storiesCache.tok, storiesCache.err = tokenizer.LoadBPEFile(filepath.Join(dir, "tok512.bin"), 512)
		}
	})
	if storiesCache.err != nil {
		t.Fatal(storiesCache.err)
	}
	e, err := llama.New(storiesCache.model, storiesCache.tok, llama.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// start runs an engine for the test's lifetime.
func start(t testing.TB, cfg Config, exec executor.Executor) *Engine {
	t.Helper()
	e, err := New(cfg, exec, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

type result struct {
	tokens   []uint32
	text     string
	final    Output
	logprobs []sample.Logprob
}

// collect reads a stream to its end.
func collect(t testing.TB, st *Stream) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var r result
	for {
		o, err := st.Recv(ctx)
		if errors.Is(err, io.EOF) {
			return r
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		r.tokens = append(r.tokens, o.TokenIDs...)
		r.logprobs = append(r.logprobs, o.Logprobs...)
		r.text += o.Text
		if o.Finish != "" {
			r.final = o
		}
	}
}

func run(t testing.TB, e *Engine, req Request) result {
	t.Helper()
	st, err := e.Submit(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	return collect(t, st)
}

func prompt(n, salt int) []uint32 {
	p := make([]uint32, n)
	for i := range p {
		p[i] = uint32(3 + (i*7+salt*13)%250)
	}
	return p
}

func seed(v uint64) *uint64 { return &v }

func sameTokens(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
