package worker

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	kvbmv1 "switchyard.dev/gen/switchyard/kvbm/v1"
	"switchyard.dev/gen/switchyard/kvbm/v1/kvbmv1connect"
	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/discovery"
)

// sharedReporter tells the kvbm-controller's catalog what this worker did
// with the shared tier (s3tier.Observer): the blocks it wrote, read and
// found gone, and how fast. Reports are batched (one call every
// reportEvery), never block an offload or an onboarding, and are kept
// while no controller answers, up to maxPendingReport blocks; beyond
// that the oldest news is dropped, which the catalog's own listing of the
// store repairs.
type sharedReporter struct {
	id, model string
	blockSize int
	log       *slog.Logger

	mu         sync.Mutex
	blockBytes int
	pending    kvbmv1.ReportSharedBlocksRequest
}

const (
	reportEvery      = 250 * time.Millisecond
	maxPendingReport = 1 << 15
)

func newSharedReporter(id, model string, blockSize int, log *slog.Logger) *sharedReporter {
	return &sharedReporter{id: id, model: model, blockSize: blockSize, log: log}
}

func (r *sharedReporter) setBlockBytes(n int) {
	r.mu.Lock()
	r.blockBytes = n
	r.mu.Unlock()
}

func (r *sharedReporter) size() int {
	return len(r.pending.Written) + len(r.pending.Read) + len(r.pending.Gone)
}

// room drops the older half of each kind of news while the batch is
// full; r.mu held.
func (r *sharedReporter) room() {
	for r.size() >= maxPendingReport {
		p := &r.pending
		p.Written = slices.Delete(p.Written, 0, (len(p.Written)+1)/2)
		p.Read = slices.Delete(p.Read, 0, (len(p.Read)+1)/2)
		p.Gone = slices.Delete(p.Gone, 0, (len(p.Gone)+1)/2)
	}
}

// Wrote implements s3tier.Observer.
func (r *sharedReporter) Wrote(hash uint64, n int, took time.Duration, stored bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.room()
	// A block's object has one size whoever wrote it: a refused write
	// names it too, though it moved no bytes.
	if stored {
		r.pending.WriteBytes += uint64(n)
		r.pending.WriteNanos += uint64(took.Nanoseconds())
	}
	r.pending.Written = append(r.pending.Written, &kvbmv1.SharedBlock{Hash: hash, Bytes: uint64(n)})
}

// Read implements s3tier.Observer.
func (r *sharedReporter) Read(hash uint64, n int, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.room()
	r.pending.Read = append(r.pending.Read, hash)
	r.pending.ReadBytes += uint64(n)
	r.pending.ReadNanos += uint64(took.Nanoseconds())
}

// Gone implements s3tier.Observer.
func (r *sharedReporter) Gone(hash uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.room()
	r.pending.Gone = append(r.pending.Gone, hash)
}

// take returns the pending report and starts a new one (nil: nothing new).
func (r *sharedReporter) take() *kvbmv1.ReportSharedBlocksRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.size() == 0 && r.pending.WriteBytes == 0 && r.pending.ReadBytes == 0 {
		return nil
	}
	req := &kvbmv1.ReportSharedBlocksRequest{
		InstanceId: r.id,
		Namespace:  &kvbmv1.SharedNamespace{Model: r.model, BlockSize: uint32(r.blockSize), BlockBytes: uint64(r.blockBytes)},
		Written:    r.pending.Written, Read: r.pending.Read, Gone: r.pending.Gone,
		WriteBytes: r.pending.WriteBytes, WriteNanos: r.pending.WriteNanos, ReadBytes: r.pending.ReadBytes, ReadNanos: r.pending.ReadNanos,
	}
	r.pending = kvbmv1.ReportSharedBlocksRequest{}
	return req
}

// giveBack returns an unsent report to the front of the next one.
func (r *sharedReporter) giveBack(req *kvbmv1.ReportSharedBlocksRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := &r.pending
	p.Written = append(req.Written, p.Written...)
	p.Read = append(req.Read, p.Read...)
	p.Gone = append(req.Gone, p.Gone...)
	p.WriteBytes += req.WriteBytes
	p.WriteNanos += req.WriteNanos
	p.ReadBytes += req.ReadBytes
	p.ReadNanos += req.ReadNanos
	r.room()
}

// run sends the reports to the first kvbm-controller (by id) in
// discovery that keeps the shared tier's catalog, until
// ctx ends, and once more after (the last news of a draining worker).
func (r *sharedReporter) run(ctx context.Context, reg discovery.Registry, hc connect.HTTPClient, opts ...connect.ClientOption) {
	clients := client.NewCache(hc, kvbmv1connect.NewKvbmControllerServiceClient, opts...)
	var target atomic.Pointer[string] // the catalog's controller, nil: none
	if reg != nil {
		err := discovery.WatchRole(ctx, reg, r.log, discovery.RoleKVBMController, func(ins []discovery.Instance) {
			if in, ok := discovery.SharedTierController(ins); ok {
				u := in.URL()
				target.Store(&u)
			} else {
				target.Store(nil)
			}
		})
		if err != nil {
			r.log.Warn("shared tier reports: cannot watch for the kvbm-controller; not reporting", "err", err)
		}
	}
	send := func(ctx context.Context) {
		u := target.Load()
		req := r.take()
		if req == nil {
			return
		}
		if u == nil {
			r.giveBack(req)
			return
		}
		c := clients.Get(*u)
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if _, err := c.ReportSharedBlocks(cctx, connect.NewRequest(req)); err != nil {
			if connect.CodeOf(err) == connect.CodeFailedPrecondition || connect.CodeOf(err) == connect.CodeInvalidArgument {
				// A controller without a catalog, or one refusing this
				// report: keeping it would only grow the batch.
				r.log.Debug("shared tier report refused", "err", err)
				return
			}
			r.giveBack(req)
			r.log.Debug("shared tier report not sent; kept for the next", "err", err)
		}
	}
	tick := time.NewTicker(reportEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			send(fctx)
			cancel()
			return
		case <-tick.C:
			send(ctx)
		}
	}
}
