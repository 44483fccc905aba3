package catalog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/frontend/internal/upstream"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

func TestDiscoveryCatalog(t *testing.T) {
	t.Parallel()
	broken := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w0", InfoErr: connect.NewError(connect.CodeInternal, errors.New("boom"))})
	good := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w1"})
	reg := upstreamtest.NewRegistry()
	reg.Set(discovery.RoleDecode, upstreamtest.WorkerInstance(broken), upstreamtest.WorkerInstance(good))
	c := New(Config{Registry: reg, Dialer: upstream.NewWorkers(upstream.NewHTTPClient())})
	if err := c.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := c.Models(t.Context()); len(got) != 1 || got[0].Name != "tiny" {
		t.Fatalf("Models = %+v", got)
	}
	for range 3 {
		m, err := c.Get(t.Context(), "tiny")
		if err != nil {
			t.Fatal(err)
		}
		if m.Info.GetContextLength() != 512 || m.Tok.VocabSize() != upstreamtest.VocabSize {
			t.Fatalf("info %+v", m.Info)
		}
		if ids := m.Encode("ab"); len(ids) != 3 || ids[0] != 1 {
			t.Fatalf("Encode = %v", ids)
		}
	}
	if good.InfoCalls() != 1 {
		t.Fatalf("GetModelInfo called %d times, want 1 (cached)", good.InfoCalls())
	}
	if _, err := c.Get(t.Context(), "nope"); !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("unknown model: %v", err)
	}
	reg.Set(discovery.RoleDecode)
	deptest.Eventually(t, 5*time.Second, "the model to be unlisted after its workers left", func() bool {
		return len(c.Models(t.Context())) == 0
	})
}

func TestLocatorCatalog(t *testing.T) {
	t.Parallel()
	w := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w1"})
	locate := func(_ context.Context, model string) (string, error) {
		if model != "tiny" {
			return "", connect.NewError(connect.CodeNotFound, errors.New("no such model"))
		}
		return w.URL, nil
	}
	c := New(Config{Locate: locate, Dialer: upstream.NewWorkers(upstream.NewHTTPClient())})
	if got := c.Models(t.Context()); len(got) != 0 {
		t.Fatalf("Models before any request = %+v", got)
	}
	if _, err := c.Get(t.Context(), "tiny"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(t.Context(), "other"); !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("unknown: %v", err)
	}
	if got := c.Models(t.Context()); len(got) != 1 || got[0].Name != "tiny" {
		t.Fatalf("Models = %+v", got)
	}
}

// Without discovery, a name nobody serves leaves nothing behind (each was
// kept, up to the body size, forever); lookups and listings may run
// together (-race); and a request waiting on another's lookup gives up
// with its own context.
func TestLocatorCatalogForgetsAndWaits(t *testing.T) {
	t.Parallel()
	w := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w1"})
	block := make(chan struct{})
	locate := func(ctx context.Context, model string) (string, error) {
		switch model {
		case "tiny":
			return w.URL, nil
		case "slow":
			select {
			case <-block:
			case <-ctx.Done():
			}
			return "", connect.NewError(connect.CodeUnavailable, errors.New("router gone"))
		}
		return "", connect.NewError(connect.CodeNotFound, errors.New("no such model"))
	}
	c := New(Config{Locate: locate, Dialer: upstream.NewWorkers(upstream.NewHTTPClient())})
	for i := range 50 {
		if _, err := c.Get(t.Context(), fmt.Sprintf("nope-%d", i)); !errors.Is(err, ErrUnknownModel) {
			t.Fatalf("unknown: %v", err)
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := c.Get(t.Context(), "tiny"); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() { c.Models(t.Context()) })
	}
	wg.Wait()
	c.mu.Lock()
	kept := len(c.models)
	c.mu.Unlock()
	if kept != 1 {
		t.Errorf("%d entries kept after 50 unknown names and one served model, want 1", kept)
	}

	first := make(chan error, 1)
	go func() { _, err := c.Get(t.Context(), "slow"); first <- err }()
	deptest.Eventually(t, 5*time.Second, "the first lookup to start", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		e := c.models["slow"]
		return e != nil && len(e.fetching) == 1
	})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := c.Get(ctx, "slow"); !errors.Is(err, context.Canceled) {
		t.Errorf("a waiter whose context ended: %v, want context.Canceled", err)
	}
	close(block)
	if err := <-first; err == nil {
		t.Error("the slow lookup succeeded")
	}
}

func TestTokenizerKinds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind string
		data []byte
		ok   bool
	}{{"bytes", nil, true}, {"", nil, true}, {"llama2c", nil, false}, {"llama2c", []byte{1}, false}, {"sentencepiece", nil, false}} {
		info := fakeInfo(tc.kind, tc.data)
		if _, err := Tokenizer(info); (err == nil) != tc.ok {
			t.Errorf("kind %q with %d bytes: err=%v", tc.kind, len(tc.data), err)
		}
	}
}
