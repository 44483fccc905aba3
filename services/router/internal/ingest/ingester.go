package ingest

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"

	"switchyard.dev/gen/switchyard/kvbm/v1/kvbmv1connect"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/mesh/backoff"
	"switchyard.dev/libs/radix"
)

// Worker is a worker whose KV events the router follows.
type Worker struct {
	ID  string
	URL string // Connect base URL
	// Approx: the worker sends no events; the router approximates its
	// cache from its own decisions, so nothing is followed.
	Approx bool
	// SharedModel, when set, makes this the shared tier of that model
	// and block size: URL is the kvbm-controller's, whose catalog stream
	// (SubscribeSharedEvents) is followed under ID as one holder.
	SharedModel     string
	SharedBlockSize uint32
}

// Config configures an Ingester.
type Config struct {
	Index  *radix.Index
	HTTP   connect.HTTPClient // h2c client for Connect streams
	Logger *slog.Logger
	// Reconnect backoff: the ceiling of the first wait and the cap of
	// every wait (defaults 50ms and 5s).
	MinBackoff, MaxBackoff time.Duration
	ClientOptions          []connect.ClientOption
	// OnNoEvents, if set, is called when a worker answers Unimplemented:
	// the caller approximates that worker instead. Its follower asks again
	// every NoEventsRetry (default 1m), and OnEvents is called once a
	// subscription of it delivers (a worker upgraded in place, say).
	OnNoEvents, OnEvents func(id string)
	NoEventsRetry        time.Duration
	// OnLeave, if set, is called when a worker left discovery and its
	// blocks were dropped.
	OnLeave func(id string)
}

// Ingester runs one follower per worker. Its methods are safe for
// concurrent use.
type Ingester struct {
	cfg Config

	mu      sync.Mutex
	running map[string]*running
	wg      sync.WaitGroup
}

type running struct {
	w      Worker
	cancel context.CancelFunc
	done   chan struct{}
}

// New returns an ingester over cfg.Index.
func New(cfg Config) *Ingester {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.HTTP == nil {
		cfg.HTTP = http.DefaultClient
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 50 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 5 * time.Second
	}
	if cfg.NoEventsRetry <= 0 {
		cfg.NoEventsRetry = time.Minute
	}
	return &Ingester{cfg: cfg, running: map[string]*running{}}
}

// Sync makes the followed workers exactly workers:
// new workers are added to the index (unless a restored snapshot already
// has them, in which case they resume after its sequence number), and
// workers that left are stopped and their blocks dropped. Followers run
// until ctx ends or they are synced away.
func (in *Ingester) Sync(ctx context.Context, workers []Worker) {
	in.mu.Lock()
	defer in.mu.Unlock()
	want := make(map[string]Worker, len(workers))
	for _, w := range workers {
		want[w.ID] = w
	}
	for id, r := range in.running {
		if w, ok := want[id]; !ok || w != r.w {
			r.cancel()
			<-r.done
			delete(in.running, id)
			if ok && w.URL != r.w.URL {
				// Same id at a new address: most likely a restarted
				// worker, whose sequence numbers started again. Its next
				// follower dumps rather than resume after the old ones.
				_ = in.cfg.Index.Reset(id, nil)
			}
		}
	}
	for _, id := range in.cfg.Index.Workers() {
		if _, ok := want[id]; !ok {
			if err := in.cfg.Index.RemoveWorker(id); err == nil {
				in.cfg.Logger.Info("worker left, blocks dropped", "worker", id)
				if in.cfg.OnLeave != nil {
					in.cfg.OnLeave(id)
				}
			}
		}
	}
	for _, w := range workers {
		if _, ok := in.running[w.ID]; ok {
			continue
		}
		in.addWorker(w.ID)
		fctx, cancel := context.WithCancel(ctx)
		r := &running{w: w, cancel: cancel, done: make(chan struct{})}
		in.running[w.ID] = r
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			defer close(r.done)
			if w.Approx {
				// Blocks a restored snapshot holds for it were approximated
				// by another router: this one's tracker could never expire
				// them.
				_ = in.cfg.Index.Reset(w.ID, nil)
				return
			}
			f := &follower{in: in, w: w, open: workerSource(workerv1connect.NewWorkerServiceClient(in.cfg.HTTP, w.URL, in.streamOptions()...))}
			if w.SharedModel != "" {
				f.open = sharedSource(kvbmv1connect.NewKvbmControllerServiceClient(in.cfg.HTTP, w.URL, in.streamOptions()...), w.SharedModel, w.SharedBlockSize)
			}
			f.run(fctx)
		}()
	}
}

func (in *Ingester) addWorker(id string) {
	if err := in.cfg.Index.AddWorker(id); err != nil && !errors.Is(err, radix.ErrWorkerExists) {
		in.cfg.Logger.Warn("index: add worker", "worker", id, "err", err)
	}
}

// Wait blocks until every follower has stopped (after ctx ended).
func (in *Ingester) Wait() { in.wg.Wait() }

// retry is a reconnect loop's backoff: from MinBackoff doubling up to
// MaxBackoff, each wait drawn with full jitter (package backoff), so the
// routers that lost a worker's stream together do not redial it in
// lockstep; the first failure and every tenth are logged.
type retry struct {
	in *Ingester
	b  *backoff.Backoff
}

func newRetry(in *Ingester) *retry {
	return &retry{in: in, b: backoff.New(backoff.Policy{Base: in.cfg.MinBackoff, Max: in.cfg.MaxBackoff}, nil)}
}

// reset starts over after progress.
func (r *retry) reset() { r.b.Reset() }

// wait logs failure err (msg, with args) when due and sleeps the next
// backoff; false if ctx ended first.
func (r *retry) wait(ctx context.Context, msg string, err error, args ...any) bool {
	d := r.b.Next()
	if backoff.LogWorthy(r.b.Failures()) {
		r.in.cfg.Logger.Warn(msg, append(args, "err", err, "failures", r.b.Failures(), "retry_in", d)...)
	}
	return backoff.Sleep(ctx, d)
}

// streamOptions are the event streams' client options: the configured
// ones, without gzip. Events are block hashes, random 64-bit numbers that
// do not compress, so gzip would only cost both ends CPU
// (BenchmarkStoredEvent in libs/worker/handler).
func (in *Ingester) streamOptions() []connect.ClientOption {
	return append(slices.Clip(in.cfg.ClientOptions), connect.WithAcceptCompression("gzip", nil, nil))
}
