package httpapi

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"switchyard.dev/libs/mesh/reqid"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

// The client's X-Request-Id, when usable, is the request's id: echoed on
// every kind of answer, and the one the router and the worker receive. An
// unusable or missing one is replaced by a new id, which is what travels.
func TestRequestIDEchoedAndPropagated(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		sent   string
		body   string
		status int
		keep   bool
		worker bool // the request reaches a worker
	}{
		{"answer", "client-1", chatBody(`"max_tokens":3`), http.StatusOK, true, true},
		{"stream", "client-2", chatBody(`"max_tokens":3,"stream":true`), http.StatusOK, true, true},
		{"error", "client-3", `{"model":"nope","messages":[{"role":"user","content":"Hi"}]}`, http.StatusNotFound, true, false},
		{"bad request", "client-4", `{"model":`, http.StatusBadRequest, true, false},
		{"none sent", "", chatBody(`"max_tokens":2`), http.StatusOK, false, true},
		{"too long", strings.Repeat("x", reqid.MaxLen+1), chatBody(`"max_tokens":2,"stream":true`), http.StatusOK, false, true},
		{"not ASCII", "id-ü", chatBody(`"max_tokens":2`), http.StatusOK, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, stackConfig{})
			var header []string
			if tt.sent != "" {
				header = []string{reqid.Header, tt.sent}
			}
			resp := s.post(t, "/v1/chat/completions", tt.body, header...)
			_, _ = io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			id := resp.Header.Get(reqid.Header)
			switch {
			case tt.keep && id != tt.sent:
				t.Fatalf("echoed %q, want the client's %q", id, tt.sent)
			case !tt.keep && (id == tt.sent || !reqid.Valid(id)):
				t.Fatalf("echoed %q for the client's %q, want a new valid id", id, tt.sent)
			}
			if !tt.worker {
				return
			}
			if got := s.Workers[0].RequestIDs(); !slices.Equal(got, []string{id}) {
				t.Errorf("the worker saw request ids %q, want [%q]", got, id)
			}
			if got := s.Router.RequestIDs("Route"); !slices.Equal(got, []string{id}) {
				t.Errorf("the router's Route saw request ids %q, want [%q]", got, id)
			}
			s.releases(t)
			for _, got := range s.Router.RequestIDs("Report") {
				if got != id {
					t.Errorf("a Report carried request id %q, want %q", got, id)
				}
			}
		})
	}
}

// The choices of one request (n > 1) and its migrations are one request:
// each worker call carries its id.
func TestRequestIDAcrossChoicesAndMigrations(t *testing.T) {
	t.Parallel()
	s := newStack(t, stackConfig{workers: []upstreamtest.WorkerConfig{{ID: "w1", DieAfter: 2, Abort: true}, {ID: "w2"}}})
	resp := s.post(t, "/v1/chat/completions", chatBody(`"max_tokens":4,"n":2`), reqid.Header, "multi-1")
	_, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var calls []string
	for _, w := range s.Workers {
		calls = append(calls, w.RequestIDs()...)
	}
	if len(calls) < 3 { // two choices, at least one migrated
		t.Fatalf("%d worker calls, want at least 3 (two choices, a migration)", len(calls))
	}
	for _, got := range calls {
		if got != "multi-1" {
			t.Errorf("a worker call carried request id %q, want multi-1", got)
		}
	}
}
