package peer

import (
	"testing"

	"connectrpc.com/connect"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
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
		if connect.CodeOf(err) != tt.code && !(err == nil && tt.code == 0) {
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
