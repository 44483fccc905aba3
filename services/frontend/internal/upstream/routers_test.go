package upstream

import (
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/services/frontend/internal/fakemesh"
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
	w := fakemesh.StartWorker(t, fakemesh.WorkerConfig{ID: "w"})
	good := fakemesh.StartRouter(t, w)
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
	if n := len(good.Releases()); n != 4 {
		t.Fatalf("releases %d", n)
	}
}

func TestRoutersErrors(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.DiscardHandler)
	if _, err := NewRouters(NewHTTPClient(), log, nil).Route(t.Context(), &routerv1.RouteRequest{}); !errors.Is(err, ErrNoRouter) {
		t.Fatalf("no routers: %v", err)
	}
	bad := fakemesh.StartRouter(t)
	bad.FailWith(connect.NewError(connect.CodeInvalidArgument, errors.New("no")))
	good := fakemesh.StartRouter(t)
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
	w := fakemesh.StartWorker(t, fakemesh.WorkerConfig{ID: "w"})
	good := fakemesh.StartRouter(t, w)
	reg := fakemesh.NewRegistry()
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
