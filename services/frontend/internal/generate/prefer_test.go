package generate

import (
	"slices"
	"testing"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

// PreferWorker asks the router for that worker on the first attempt, and
// each delta names the worker that generated it.
func TestPreferWorker(t *testing.T) {
	t.Parallel()
	a := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "a"})
	b := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "b"})
	g, router := newGen(t, 1, a, b)
	req := request(t, 4)
	req.PreferWorker = "b" // the fake router's round robin would pick a
	var workers []string
	_, err := g.Run(t.Context(), req, func(d Delta) error {
		workers = append(workers, d.Worker)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Requests()) != 1 || len(a.Requests()) != 0 {
		t.Fatalf("a got %d requests, b %d; want b only", len(a.Requests()), len(b.Requests()))
	}
	for _, w := range workers {
		if w != "b" {
			t.Fatalf("deltas from %v", workers)
		}
	}
	if len(workers) == 0 {
		t.Fatal("no deltas")
	}
	if got := router.Routes()[0].GetHints().GetWorkerId(); got != "b" {
		t.Fatalf("route hints worker_id %q", got)
	}
}

// A preference yields to the client's own hints.worker_id, and a
// migration routes freely, away from the worker that failed.
func TestPreferWorkerIsOnlyAPreference(t *testing.T) {
	t.Parallel()
	a := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "a"})
	dying := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "d", DieAfter: 2})
	g, router := newGen(t, 2, dying, a)

	pinned := request(t, 4)
	pinned.PreferWorker, pinned.Hints = "d", &commonv1.Hints{WorkerId: "a"}
	if r := generate(t.Context(), g, pinned); r.err != nil || len(dying.Requests()) != 0 {
		t.Fatalf("err %v, the preferred worker got %d requests; want the pinned one", r.err, len(dying.Requests()))
	}

	req := request(t, 10)
	req.ID, req.PreferWorker = "req-2", "d"
	r := generate(t.Context(), g, req)
	if r.err != nil || r.text != want(10) || r.res.Migrations == 0 {
		t.Fatalf("got %q %+v err %v", r.text, r.res, r.err)
	}
	// (The fake router ignores exclusions, so more than one migration may
	// land on the dying worker again.)
	for _, rr := range router.Routes()[2:] {
		if rr.GetHints().GetWorkerId() != "" || !slices.Contains(rr.GetExcludeInstanceIds(), "d") {
			t.Fatalf("migration routed with hints %v, excluding %v", rr.GetHints(), rr.GetExcludeInstanceIds())
		}
	}
}
