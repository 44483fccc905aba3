package upstream

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

// deadURL is a loopback address nothing listens on.
func deadURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "http://" + addr
}

func TestRoutersFailOver(t *testing.T) {
	t.Parallel()
	w := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w"})
	good := upstreamtest.StartRouter(t, w)
	r := NewRouters(NewHTTPClient(), slog.New(slog.DiscardHandler), []string{deadURL(t), good.URL})
	for range 4 { // both start positions of the round-robin
		routed, err := r.Route(t.Context(), &routerv1.RouteRequest{RequestId: "x", Model: "tiny"})
		if err != nil {
			t.Fatal(err)
		}
		if routed.Replica != good.URL || routed.Resp.GetDecode().GetAddress() != w.URL {
			t.Fatalf("routed %+v", routed)
		}
		r.Release(t.Context(), routed.Replica, "x")
	}
	flush(t, r)
	if n := len(good.Releases()); n != 4 {
		t.Fatalf("releases %d", n)
	}
}

// TestRoutersReplicaLeft checks that Release and PrefillDone reach the
// replica that routed even after it left discovery, and that Route no
// longer asks it.
func TestRoutersReplicaLeft(t *testing.T) {
	t.Parallel()
	w := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w"})
	gone, stays := upstreamtest.StartRouter(t, w), upstreamtest.StartRouter(t, w)
	r := NewRouters(NewHTTPClient(), slog.New(slog.DiscardHandler), []string{gone.URL})
	routed, err := r.Route(t.Context(), &routerv1.RouteRequest{RequestId: "x", Model: "tiny"})
	if err != nil || routed.Replica != gone.URL {
		t.Fatalf("routed %+v, %v", routed, err)
	}
	r.set([]string{stays.URL}, make([]discovery.Instance, 1))
	r.PrefillDone(t.Context(), routed.Replica, "x")
	r.Release(t.Context(), routed.Replica, "x")
	flush(t, r)
	if p, rel := gone.PrefillDones(), gone.Releases(); len(p) != 1 || len(rel) != 1 {
		t.Fatalf("replica that routed got prefill-done %v, releases %v", p, rel)
	}
	for range 2 {
		if routed, err := r.Route(t.Context(), &routerv1.RouteRequest{RequestId: "y", Model: "tiny"}); err != nil || routed.Replica != stays.URL {
			t.Fatalf("after the change: routed %+v, %v", routed, err)
		}
	}
	if n := len(gone.Routes()); n != 1 {
		t.Fatalf("replica that left was asked %d times, want once", n)
	}
	r.Release(t.Context(), "http://never-known", "z") // no client: nothing to tell
}

// TestRoutersConcurrentChanges routes while discovery changes the
// replicas (run with -race): every call routes to a replica of one of the
// lists.
func TestRoutersConcurrentChanges(t *testing.T) {
	t.Parallel()
	w := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w"})
	a, b := upstreamtest.StartRouter(t, w), upstreamtest.StartRouter(t, w)
	r := NewRouters(NewHTTPClient(), slog.New(slog.DiscardHandler), []string{a.URL})
	lists := [][]string{{a.URL}, {b.URL}, {a.URL, b.URL}}
	stop, written := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(written)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
				r.set(lists[i%len(lists)], make([]discovery.Instance, len(lists[i%len(lists)])))
			}
		}
	}()
	var routers sync.WaitGroup
	for g := range 4 {
		routers.Go(func() {
			for i := range 25 {
				id := fmt.Sprint(g, "-", i)
				routed, err := r.Route(t.Context(), &routerv1.RouteRequest{RequestId: id, Model: "tiny"})
				if err != nil || (routed.Replica != a.URL && routed.Replica != b.URL) {
					t.Errorf("routed %+v, %v", routed, err)
					return
				}
				r.Release(t.Context(), routed.Replica, id)
			}
		})
	}
	routers.Wait()
	close(stop)
	<-written
	flush(t, r)
	if n := len(a.Releases()) + len(b.Releases()); !t.Failed() && n != 100 {
		t.Errorf("%d releases reached the routing replicas, want 100", n)
	}
}

func TestRoutersErrors(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	if _, err := NewRouters(NewHTTPClient(), log, nil).Route(t.Context(), &routerv1.RouteRequest{}); !errors.Is(err, ErrNoRouter) {
		t.Fatalf("no routers: %v", err)
	}
	bad := upstreamtest.StartRouter(t)
	bad.FailWith(connect.NewError(connect.CodeInvalidArgument, errors.New("no")))
	good := upstreamtest.StartRouter(t)
	r := NewRouters(NewHTTPClient(), log, []string{bad.URL, good.URL})
	for range 2 {
		if _, err := r.Route(t.Context(), &routerv1.RouteRequest{Model: "tiny"}); err == nil {
			t.Fatal("no error")
		}
	}
	if len(bad.Routes())+len(good.Routes()) != 2 {
		t.Fatalf("non-Unavailable errors must not fail over: %d, %d", len(bad.Routes()), len(good.Routes()))
	}
}

func TestRoutersWatch(t *testing.T) {
	t.Parallel()
	w := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w"})
	good := upstreamtest.StartRouter(t, w)
	reg := upstreamtest.NewRegistry()
	r := NewRouters(NewHTTPClient(), slog.New(slog.DiscardHandler), nil)
	if err := r.Watch(t.Context(), reg); err != nil {
		t.Fatal(err)
	}
	reg.Set(discovery.RoleRouter, discovery.Instance{ID: "r1", Role: discovery.RoleRouter, Address: good.URL[len("http://"):]})
	for {
		if _, err := r.Route(t.Context(), &routerv1.RouteRequest{Model: "tiny"}); err == nil {
			return
		}
		select {
		case <-t.Context().Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func flush(t *testing.T, r *Routers) {
	t.Helper()
	if err := r.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// TestReportsBatch: reports made while a Report is in flight go together
// in the next one, each request's prefill-done before its release, and
// every report arrives once.
func TestReportsBatch(t *testing.T) {
	t.Parallel()
	w := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w"})
	fr := upstreamtest.StartRouter(t, w)
	r := NewRouters(NewHTTPClient(), slog.New(slog.DiscardHandler), []string{fr.URL})
	release := fr.HoldReports()
	r.PrefillDone(t.Context(), fr.URL, "first") // in flight, held
	const n = 200
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprint("req-", i)
			r.PrefillDone(t.Context(), fr.URL, id)
			r.Release(t.Context(), fr.URL, id)
		})
	}
	wg.Wait()
	release()
	flush(t, r)
	if got := fr.Reports(); got != 2 {
		t.Fatalf("%d Report calls for 1 + %d requests, want 2 (one held, one with the rest)", got, n)
	}
	done, rel := fr.PrefillDones(), fr.Releases()
	if len(done) != n+1 || len(rel) != n || done[0] != "first" {
		t.Fatalf("prefill-done %d (first %q), released %d", len(done), done[0], len(rel))
	}
	if len(slices.Compact(slices.Sorted(slices.Values(rel)))) != n {
		t.Fatal("a release arrived twice")
	}
}

// TestReportsToOldRouter: a replica without Report gets the single calls,
// in order, from then on.
func TestReportsToOldRouter(t *testing.T) {
	t.Parallel()
	w := upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w"})
	fr := upstreamtest.StartRouter(t, w)
	fr.WithoutReport()
	r := NewRouters(NewHTTPClient(), slog.New(slog.DiscardHandler), []string{fr.URL})
	for _, id := range []string{"a", "b"} {
		r.PrefillDone(t.Context(), fr.URL, id)
		r.Release(t.Context(), fr.URL, id)
		flush(t, r)
	}
	if done, rel := fr.PrefillDones(), fr.Releases(); !slices.Equal(done, []string{"a", "b"}) || !slices.Equal(rel, []string{"a", "b"}) || fr.Reports() != 0 {
		t.Fatalf("prefill-done %v, released %v, reports %d", done, rel, fr.Reports())
	}
}

// TestReportDropRest: against an old router, a single report that timed
// out or found the replica unavailable drops the rest of its batch (each
// would wait as long); other failures, or the last call, do not.
func TestReportDropRest(t *testing.T) {
	t.Parallel()
	rep := newReporter(nil, "http://router", slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		err  error
		rest int
		want bool
	}{
		{nil, 5, false},
		{connect.NewError(connect.CodeDeadlineExceeded, errors.New("slow")), 5, true},
		{connect.NewError(connect.CodeUnavailable, errors.New("gone")), 5, true},
		{connect.NewError(connect.CodeUnavailable, errors.New("gone")), 0, false},
		{connect.NewError(connect.CodeNotFound, errors.New("unknown id")), 5, false},
	} {
		if got := rep.dropRest(tc.err, "release", "id", tc.rest); got != tc.want {
			t.Errorf("dropRest(%v, rest %d) = %v, want %v", tc.err, tc.rest, got, tc.want)
		}
	}
}
