package generate

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"

	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/services/frontend/internal/upstream"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

type run struct {
	text   string
	deltas int
	res    Result
	err    error
}

func newGen(t *testing.T, attempts int, workers ...*upstreamtest.Worker) (*Generator, *reports) {
	t.Helper()
	r := upstreamtest.StartRouter(t, workers...)
	hc := upstream.NewHTTPClient()
	routers := upstream.NewRouters(hc, slog.New(slog.DiscardHandler), []string{r.URL})
	return New(Config{Router: routers, Dialer: upstream.NewWorkers(hc), MigrationAttempts: attempts}), &reports{r, routers, t}
}

// reports is the fake router, whose report lists are read after the
// frontend's background reports were flushed.
type reports struct {
	*upstreamtest.Router
	routers *upstream.Routers
	t       *testing.T
}

func (r *reports) flush() {
	r.t.Helper()
	if err := r.routers.Flush(r.t.Context()); err != nil {
		r.t.Fatal(err)
	}
}

func (r *reports) Releases() []string {
	r.flush()
	return r.Router.Releases()
}

func (r *reports) PrefillDones() []string {
	r.flush()
	return r.Router.PrefillDones()
}

func request(t *testing.T, maxTokens int, stop ...string) Request {
	tok, err := tokenizer.NewBytes(upstreamtest.VocabSize)
	if err != nil {
		t.Fatal(err)
	}
	return Request{ID: "req-1", Model: "tiny", Prompt: tok.Encode("Hi", true, false), Tokenizer: tok, MaxTokens: maxTokens, Stop: stop}
}

func generate(ctx context.Context, g *Generator, req Request) run {
	var b strings.Builder
	var r run
	r.res, r.err = g.Run(ctx, req, func(d Delta) error {
		b.WriteString(d.Text)
		r.deltas++
		return nil
	})
	r.text = b.String()
	return r
}

// want is the text fake workers produce for a 3-token prompt.
func want(n int) string { return (upstreamtest.Script + upstreamtest.Script)[3 : 3+n] }

func TestUndisturbed(t *testing.T) {
	t.Parallel()
	g, router := newGen(t, 3, upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "a", Cached: 2}))
	r := generate(t.Context(), g, request(t, 40))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.text != want(40) || r.res.Finish != "length" || r.res.CompletionTokens != 40 || r.res.PromptTokens != 3 || r.res.CachedTokens != 2 {
		t.Fatalf("got %q %+v", r.text, r.res)
	}
	if rel := router.Releases(); len(rel) != 1 || rel[0] != "req-1" {
		t.Fatalf("releases %v", rel)
	}
	// The first token is reported, so the router can end the prefill load.
	if routes := router.Routes(); !routes[0].GetReportsPrefillDone() {
		t.Fatal("route request does not promise a prefill-done report")
	}
	if got := router.PrefillDones(); len(got) != 1 || got[0] != "req-1" {
		t.Fatalf("prefill-done reports %v", got)
	}
}

// TestNamesPeers: the prefill worker and the prefix source the router
// names reach the decode worker, which decides whether to use them.
func TestNamesPeers(t *testing.T) {
	t.Parallel()
	w := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "a"})
	g, router := newGen(t, 1, w)
	router.Name(&routerv1.Worker{InstanceId: "p", Address: "http://p:1"}, &routerv1.Worker{InstanceId: "b", Address: "http://b:2"}, 7)
	if r := generate(t.Context(), g, request(t, 4)); r.err != nil {
		t.Fatal(r.err)
	}
	reqs := w.Requests()
	if len(reqs) != 1 || reqs[0].GetPrefillWorker() != "http://p:1" || reqs[0].GetPrefixWorker() != "http://b:2" || reqs[0].GetPrefixBlocks() != 7 {
		t.Fatalf("worker got %+v", reqs)
	}
}

// TestPassesArrival: the worker hears when the router decided (its FCFS
// order), or this frontend's time from a router that does not say; a
// migrated request keeps its first decision's.
func TestPassesArrival(t *testing.T) {
	t.Parallel()
	for _, decided := range []int64{0, 1_700_000_000_000_000_000} {
		dying := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "a", DieAfter: 5})
		healthy := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "b"})
		g, router := newGen(t, 3, dying, healthy)
		router.Decided(decided)
		before := time.Now().UnixNano()
		if r := generate(t.Context(), g, request(t, 20)); r.err != nil || r.res.Migrations != 1 {
			t.Fatalf("decided %d: err %v, %d migrations; want one", decided, r.err, r.res.Migrations)
		}
		a, b := dying.Requests(), healthy.Requests()
		if len(a) != 1 || len(b) != 1 {
			t.Fatalf("decided %d: %d and %d requests, want one each", decided, len(a), len(b))
		}
		got := a[0].GetArrivalUnixNanos()
		if b[0].GetArrivalUnixNanos() != got {
			t.Fatalf("decided %d: the migrated attempt arrived at %d, the first at %d", decided, b[0].GetArrivalUnixNanos(), got)
		}
		if decided != 0 && got != decided || decided == 0 && (got < before || got > time.Now().UnixNano()) {
			t.Fatalf("decided %d: the worker got arrival %d", decided, got)
		}
	}
}

func TestMigration(t *testing.T) {
	t.Parallel()
	for _, abort := range []bool{false, true} {
		t.Run(map[bool]string{false: "eof", true: "unavailable"}[abort], func(t *testing.T) {
			t.Parallel()
			dying := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "a", DieAfter: 60, Abort: abort, Cached: 3})
			healthy := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "b"})
			g, router := newGen(t, 3, dying, healthy)
			r := generate(t.Context(), g, request(t, 80))
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.text != want(80) {
				t.Fatalf("migrated text differs:\n got %q\nwant %q", r.text, want(80))
			}
			if r.res.Migrations != 1 || r.res.CompletionTokens != 80 || r.res.PromptTokens != 3 || r.res.CachedTokens != 3 || r.res.Finish != "length" {
				t.Fatalf("result %+v", r.res)
			}
			routes := router.Routes()
			if len(routes) != 2 || len(routes[1].GetTokenIds()) != 63 {
				t.Fatalf("routes: %d, second prompt %d tokens", len(routes), len(routes[len(routes)-1].GetTokenIds()))
			}
			if got := healthy.Requests()[0].GetStop().GetMaxTokens(); got != 20 {
				t.Fatalf("second worker max_tokens %d, want 20", got)
			}
			if rel := router.Releases(); len(rel) != 2 || rel[0] != "req-1" || rel[1] != "req-1-m1" {
				t.Fatalf("releases %v", rel)
			}
		})
	}
}

// A worker's CANCELLED message may carry tokens (coalesced with it): their
// text reaches the client before the generation moves on, and the next
// worker continues after them.
func TestCancelledMessageWithTokens(t *testing.T) {
	t.Parallel()
	cancelling := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "a", CancelAfter: 30, Batch: 4})
	healthy := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "b"})
	g, _ := newGen(t, 3, cancelling, healthy)
	r := generate(t.Context(), g, request(t, 80))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.text != want(80) || r.res.Migrations != 1 || r.res.CompletionTokens != 80 || r.res.Finish != "length" {
		t.Fatalf("got %q %+v\nwant %q", r.text, r.res, want(80))
	}
}

func TestMigrationGivesUp(t *testing.T) {
	t.Parallel()
	g, router := newGen(t, 2, upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "a", DieAfter: 2, Abort: true}))
	r := generate(t.Context(), g, request(t, 40))
	if r.err == nil || connect.CodeOf(r.err) != connect.CodeUnavailable {
		t.Fatalf("err %v", r.err)
	}
	if len(router.Routes()) != 3 || r.res.CompletionTokens != 6 {
		t.Fatalf("routes %d, result %+v", len(router.Routes()), r.res)
	}
}

func TestNotMigratable(t *testing.T) {
	t.Parallel()
	w := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "a", GenerateErr: connect.NewError(connect.CodeInvalidArgument, errors.New("bad"))})
	g, router := newGen(t, 3, w)
	r := generate(t.Context(), g, request(t, 10))
	if connect.CodeOf(r.err) != connect.CodeInvalidArgument || len(router.Routes()) != 1 || r.deltas != 0 {
		t.Fatalf("err %v, routes %d", r.err, len(router.Routes()))
	}
}

func TestStops(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cfg       upstreamtest.WorkerConfig
		stop      []string
		text      string
		finish    string
		generated int
	}{
		{name: "stop string", stop: []string{"time"}, text: "e upon a ", finish: "stop", generated: 13},
		{name: "first of two stops", stop: []string{"fox", "upon"}, text: "e ", finish: "stop", generated: 6},
		{name: "eos", cfg: upstreamtest.WorkerConfig{EOSAfter: 5}, text: want(5), finish: "stop", generated: 6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.ID = "a"
			g, _ := newGen(t, 3, upstreamtest.StartWorker(t, tc.cfg))
			r := generate(t.Context(), g, request(t, 50, tc.stop...))
			if r.err != nil || r.text != tc.text || r.res.Finish != tc.finish || r.res.CompletionTokens != tc.generated {
				t.Fatalf("got %q %+v %v", r.text, r.res, r.err)
			}
		})
	}
}

func TestCancelReachesWorker(t *testing.T) {
	t.Parallel()
	w := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "a", TokenDelay: 5 * time.Millisecond})
	g, router := newGen(t, 3, w)
	ctx, cancel := context.WithCancel(t.Context())
	req := request(t, 10000)
	n := 0
	_, err := g.Run(ctx, req, func(Delta) error {
		if n++; n == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) && connect.CodeOf(err) != connect.CodeCanceled {
		t.Fatalf("err %v", err)
	}
	select {
	case <-w.Cancelled():
	case <-time.After(10 * time.Second):
		t.Fatal("worker never saw the cancellation")
	}
	if len(router.Routes()) != 1 || len(router.Releases()) != 1 {
		t.Fatalf("routes %d releases %d", len(router.Routes()), len(router.Releases()))
	}
}
