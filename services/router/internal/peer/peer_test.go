package peer

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/gen/switchyard/router/v1/routerv1connect"
	"switchyard.dev/libs/mesh/discovery"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	var applied []string
	h := &Handler{Self: "me", Apply: func(origin string, evs []*routerv1.LoadEvent) int {
		applied = append(applied, origin)
		return len(evs)
	}}
	evs := []*routerv1.LoadEvent{{Kind: routerv1.LoadEventKind_LOAD_EVENT_KIND_ADD, RequestId: "q"}}
	tests := []struct {
		origin  string
		applied uint32
		code    connect.Code
	}{
		{"other", 1, 0},
		{"me", 0, 0}, // no echo
		{"", 0, connect.CodeInvalidArgument},
	}
	for _, tt := range tests {
		res, err := h.PushLoadEvents(t.Context(), connect.NewRequest(&routerv1.PushLoadEventsRequest{OriginRouterId: tt.origin, Events: evs}))
		if connect.CodeOf(err) != tt.code && (err != nil || tt.code != 0) {
			t.Errorf("origin %q: err %v", tt.origin, err)
		}
		if err == nil && res.Msg.GetApplied() != tt.applied {
			t.Errorf("origin %q: applied %d, want %d", tt.origin, res.Msg.GetApplied(), tt.applied)
		}
	}
	if len(applied) != 1 || applied[0] != "other" {
		t.Errorf("applied origins %v", applied)
	}
}

// peerServer serves RouterPeerService; each push is handed to got, after
// gate (if any) lets it through.
func peerServer(t *testing.T, gate <-chan struct{}, got chan<- []string) discovery.Instance {
	t.Helper()
	h := &Handler{Self: "peer", Apply: func(_ string, evs []*routerv1.LoadEvent) int {
		if gate != nil {
			<-gate
		}
		var ids []string
		for _, e := range evs {
			ids = append(ids, e.GetRequestId())
		}
		got <- ids
		return len(evs)
	}}
	mux := http.NewServeMux()
	mux.Handle(routerv1connect.NewRouterPeerServiceHandler(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return discovery.Instance{ID: srv.URL, Role: discovery.RoleRouter, Address: strings.TrimPrefix(srv.URL, "http://")}
}

// A peer whose push hangs delays only its own events: the other peer gets
// every batch meanwhile, and the slow one gets what queued once it answers.
func TestPusherSlowPeer(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	slowGot, fastGot := make(chan []string, 8), make(chan []string, 8)
	slow, fast := peerServer(t, gate, slowGot), peerServer(t, nil, fastGot)
	p := NewPusher("me", nil, slog.New(slog.DiscardHandler))
	p.timeout = time.Minute // the slow push hangs, it does not time out
	p.SetPeers([]discovery.Instance{slow, fast, {ID: "me", Address: "127.0.0.1:1"}})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go p.Run(ctx)
	wait := func(ch <-chan []string) []string {
		select {
		case ids := <-ch:
			return ids
		case <-time.After(10 * time.Second): // a hang guard
			close(gate)
			t.Fatal("no push arrived")
			return nil
		}
	}
	p.Publish(&routerv1.LoadEvent{RequestId: "a"})
	if ids := wait(fastGot); !slices.Equal(ids, []string{"a"}) {
		t.Fatalf("fast peer got %v", ids)
	}
	p.Publish(&routerv1.LoadEvent{RequestId: "b"})
	p.Publish(&routerv1.LoadEvent{RequestId: "c"})
	var fast2 []string
	for len(fast2) < 2 {
		fast2 = append(fast2, wait(fastGot)...)
	}
	if !slices.Equal(fast2, []string{"b", "c"}) {
		t.Fatalf("fast peer got %v while the slow one hung", fast2)
	}
	close(gate)
	var slowAll []string
	for len(slowAll) < 3 {
		slowAll = append(slowAll, wait(slowGot)...)
	}
	if !slices.Equal(slowAll, []string{"a", "b", "c"}) {
		t.Fatalf("slow peer got %v", slowAll)
	}
}
