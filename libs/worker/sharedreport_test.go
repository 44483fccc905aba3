package worker

import (
	"log/slog"
	"testing"
	"time"
)

// The reporter batches news, returns an unsent batch ahead of newer news,
// and bounds what it keeps while no controller answers.
func TestSharedReporterBatches(t *testing.T) {
	t.Parallel()
	r := newSharedReporter("w0", "m", 16, slog.New(slog.DiscardHandler))
	r.setBlockBytes(1000)
	if r.take() != nil {
		t.Fatal("an empty reporter has a report")
	}
	r.Wrote(1, 1100, time.Millisecond, true)
	r.Wrote(2, 1100, time.Millisecond, false) // a dedup: its size, no bytes moved
	r.Read(1, 1100, 2*time.Millisecond)
	r.Gone(9)
	req := r.take()
	if req.GetInstanceId() != "w0" || req.GetNamespace().GetModel() != "m" || req.GetNamespace().GetBlockSize() != 16 || req.GetNamespace().GetBlockBytes() != 1000 {
		t.Fatalf("report %v", req)
	}
	if len(req.GetWritten()) != 2 || req.GetWritten()[0].GetBytes() != 1100 || req.GetWritten()[1].GetBytes() != 1100 ||
		req.GetWriteBytes() != 1100 || req.GetWriteNanos() != 1e6 || req.GetReadBytes() != 1100 || len(req.GetGone()) != 1 {
		t.Fatalf("report %v", req)
	}
	r.Wrote(3, 1100, time.Millisecond, true)
	r.giveBack(req)
	again := r.take()
	if len(again.GetWritten()) != 3 || again.GetWritten()[0].GetHash() != 1 || again.GetWritten()[2].GetHash() != 3 || again.GetWriteBytes() != 2200 {
		t.Fatalf("report after give-back %v", again)
	}
	for h := range uint64(3 * maxPendingReport) {
		r.Wrote(h, 1, 0, true)
	}
	r.giveBack(again)
	if n := r.size(); n > maxPendingReport {
		t.Fatalf("%d blocks kept; at most %d", n, maxPendingReport)
	}
	// News of one kind alone is bounded too.
	for h := range uint64(3 * maxPendingReport) {
		r.Gone(h)
	}
	if n := r.size(); n > maxPendingReport || len(r.pending.Gone) == 0 {
		t.Fatalf("%d blocks kept (%d gone); at most %d, the newest kept", n, len(r.pending.Gone), maxPendingReport)
	}
}
