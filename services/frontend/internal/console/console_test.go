package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"

	supervisorv1 "switchyard.dev/gen/switchyard/supervisor/v1"
	"switchyard.dev/gen/switchyard/supervisor/v1/supervisorv1connect"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/services/frontend/internal/auth"
	"switchyard.dev/services/frontend/internal/console"
	"switchyard.dev/services/frontend/internal/fleet"
	"switchyard.dev/services/frontend/internal/fleet/fleettest"
)

type fakeDrainer struct{ drained []string }

func (d *fakeDrainer) Drain(_ context.Context, id string) (console.Drained, error) {
	if id == "missing" {
		return console.Drained{}, console.ErrUnknownInstance
	}
	d.drained = append(d.drained, id)
	return console.Drained{ID: id, Pool: "decode"}, nil
}

func newServer(t *testing.T, cfg console.Config) (*httptest.Server, *fleet.Collector) {
	t.Helper()
	m := fleettest.New()
	m.AddWorker(0, fleettest.NewWorker(&workerv1.GetLoadResponse{RunningRequests: 2, KvBlocksTotal: 10}))
	c := fleet.New(fleet.Config{Registry: m, HTTPClient: m.HTTPClient()})
	c.Poll(t.Context())
	cfg.Source = c
	mux := http.NewServeMux()
	mux.Handle(console.Prefix, console.New(cfg))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, c
}

func do(t *testing.T, method, url, key, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestPageAndSnapshot(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t, console.Config{})
	for _, path := range []string{"/console/", "/console/app.js", "/console/style.css"} {
		if code, body := do(t, http.MethodGet, srv.URL+path, "", ""); code != http.StatusOK || body == "" {
			t.Errorf("GET %s = %d (%d bytes), want 200 with a body", path, code, len(body))
		}
	}
	code, body := do(t, http.MethodGet, srv.URL+"/console/api/snapshot", "", "")
	var s fleet.Snapshot
	if err := json.Unmarshal([]byte(body), &s); code != http.StatusOK || err != nil {
		t.Fatalf("snapshot = %d %q (%v)", code, body, err)
	}
	if len(s.Instances) != 1 || s.Instances[0].Load.Running != 2 {
		t.Errorf("snapshot instances = %+v, want decode-0000 running 2", s.Instances)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	d := &fakeDrainer{}
	g := auth.New(auth.Config{Keys: []string{"user"}, AdminKeys: []string{"root"}})
	srv, _ := newServer(t, console.Config{Guard: g, Drainer: d})
	for _, tc := range []struct {
		name, method, path, key, body string
		want                          int
	}{
		{"page needs no key", http.MethodGet, "/console/", "", "", http.StatusOK},
		{"snapshot needs a key", http.MethodGet, "/console/api/snapshot", "", "", http.StatusUnauthorized},
		{"snapshot with a key", http.MethodGet, "/console/api/snapshot", "user", "", http.StatusOK},
		{"drain needs admin", http.MethodPost, "/console/api/drain", "user", `{"id":"decode-0000"}`, http.StatusForbidden},
		{"drain without key", http.MethodPost, "/console/api/drain", "", `{"id":"decode-0000"}`, http.StatusUnauthorized},
		{"drain bad body", http.MethodPost, "/console/api/drain", "root", `{}`, http.StatusBadRequest},
		{"drain unknown", http.MethodPost, "/console/api/drain", "root", `{"id":"missing"}`, http.StatusNotFound},
		{"drain as admin", http.MethodPost, "/console/api/drain", "root", `{"id":"decode-0000"}`, http.StatusOK},
		{"drain is POST only", http.MethodGet, "/console/api/drain", "root", "", http.StatusNotFound},
	} {
		if code, body := do(t, tc.method, srv.URL+tc.path, tc.key, tc.body); code != tc.want {
			t.Errorf("%s: %s %s = %d %s, want %d", tc.name, tc.method, tc.path, code, body, tc.want)
		}
	}
	if len(d.drained) != 1 || d.drained[0] != "decode-0000" {
		t.Errorf("drained = %v, want [decode-0000]", d.drained)
	}
	_, who := do(t, http.MethodGet, srv.URL+"/console/api/whoami", "root", "")
	if !strings.Contains(who, `"admin":true`) || !strings.Contains(who, `"drain":true`) {
		t.Errorf("whoami as admin = %s", who)
	}
}

func TestNoKeysMeansNoAdmin(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t, console.Config{Drainer: &fakeDrainer{}})
	if code, _ := do(t, http.MethodPost, srv.URL+"/console/api/drain", "", `{"id":"decode-0000"}`); code != http.StatusForbidden {
		t.Errorf("drain without guard = %d, want 403", code)
	}
}

func TestDrainWithoutSupervisor(t *testing.T) {
	t.Parallel()
	g := auth.New(auth.Config{AdminKeys: []string{"root"}})
	srv, _ := newServer(t, console.Config{Guard: g})
	if code, _ := do(t, http.MethodPost, srv.URL+"/console/api/drain", "root", `{"id":"decode-0000"}`); code != http.StatusNotImplemented {
		t.Errorf("drain without drainer = %d, want 501", code)
	}
}

func TestEventsPushEachSnapshot(t *testing.T) {
	t.Parallel()
	srv, c := newServer(t, console.Config{})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/console/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type = %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	next := func() fleet.Snapshot {
		t.Helper()
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var s fleet.Snapshot
				if err := json.Unmarshal([]byte(data), &s); err != nil {
					t.Fatal(err)
				}
				return s
			}
		}
		t.Fatalf("stream ended: %v", sc.Err())
		return fleet.Snapshot{}
	}
	if s := next(); s.Seq != 1 {
		t.Errorf("first event seq = %d, want 1", s.Seq)
	}
	c.Poll(t.Context())
	if s := next(); s.Seq != 2 {
		t.Errorf("second event seq = %d, want 2", s.Seq)
	}
}

// fakeSupervisor is the supervisor's API over one pool.
type fakeSupervisor struct {
	supervisorv1connect.UnimplementedSupervisorServiceHandler
	removed []string
}

func (f *fakeSupervisor) ListInstances(context.Context, *connect.Request[supervisorv1.ListInstancesRequest]) (*connect.Response[supervisorv1.ListInstancesResponse], error) {
	return connect.NewResponse(&supervisorv1.ListInstancesResponse{Instances: []*supervisorv1.Instance{
		{Id: "decode-0", Pool: "decode"}, {Id: "router-0", Pool: "router"},
	}}), nil
}

func (f *fakeSupervisor) RemoveInstance(_ context.Context, r *connect.Request[supervisorv1.RemoveInstanceRequest]) (*connect.Response[supervisorv1.RemoveInstanceResponse], error) {
	if r.Msg.GetPool() != "decode" {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("pool not scalable"))
	}
	f.removed = append(f.removed, r.Msg.GetId())
	return connect.NewResponse(&supervisorv1.RemoveInstanceResponse{Instance: &supervisorv1.Instance{Id: r.Msg.GetId(), Pool: r.Msg.GetPool()}}), nil
}

func TestSupervisorDrain(t *testing.T) {
	t.Parallel()
	fs := &fakeSupervisor{}
	mux := http.NewServeMux()
	mux.Handle(supervisorv1connect.NewSupervisorServiceHandler(fs))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s := console.NewSupervisor(srv.Client(), srv.URL+"/")

	d, err := s.Drain(t.Context(), "decode-0")
	if err != nil || d != (console.Drained{ID: "decode-0", Pool: "decode"}) {
		t.Errorf("Drain(decode-0) = %+v, %v", d, err)
	}
	if _, err := s.Drain(t.Context(), "decode-9"); !errors.Is(err, console.ErrUnknownInstance) {
		t.Errorf("Drain(decode-9) err = %v, want ErrUnknownInstance", err)
	}
	if _, err := s.Drain(t.Context(), "router-0"); err == nil || connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Errorf("Drain(router-0) err = %v, want the supervisor's refusal", err)
	}
	if len(fs.removed) != 1 {
		t.Errorf("removed = %v", fs.removed)
	}
}

func TestStopEndsEvents(t *testing.T) {
	t.Parallel()
	stop := make(chan struct{})
	srv, _ := newServer(t, console.Config{Stop: stop})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/console/api/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "id: 1") {
		t.Fatalf("first line %q, %v", line, err)
	}
	close(stop)
	if _, err := io.ReadAll(r); err != nil {
		t.Errorf("stream after stop: %v, want a clean end", err)
	}
}

// fakeOperator knows one worker, "decode-0000", and refuses rollouts of
// version "bad".
type fakeOperator struct{ cleared, cordoned []string }

func (f *fakeOperator) ClearPrefixCache(_ context.Context, id string) (console.Cleared, error) {
	if id != "decode-0000" {
		return console.Cleared{}, console.ErrNoWorker
	}
	f.cleared = append(f.cleared, id)
	return console.Cleared{ID: id}, nil
}

func (f *fakeOperator) WorkerIndex(context.Context, string, uint32) ([]console.RouterIndex, error) {
	return nil, nil
}

func (f *fakeOperator) SetRollout(_ context.Context, c console.RolloutChange) (fleet.Rollout, error) {
	if c.Version == "bad" {
		return fleet.Rollout{}, fmt.Errorf("%w: version bad", console.ErrRefused)
	}
	return fleet.Rollout{Role: c.Role, Version: c.Version}, nil
}

func (f *fakeOperator) Cordon(_ context.Context, id string, cordoned bool) (console.Cordoned, error) {
	if id != "decode-0000" {
		return console.Cordoned{}, console.ErrNoWorker
	}
	f.cordoned = append(f.cordoned, id)
	return console.Cordoned{ID: id, Cordoned: cordoned}, nil
}

func (f *fakeOperator) EndRollout(context.Context, console.RolloutEnd) (fleet.Rollout, error) {
	return fleet.Rollout{}, errors.New("planner unreachable")
}

// The admin actions on workers and rollouts answer alike: 403 without an
// admin key, 400 for a body they do not take, 404 for an unknown worker,
// 400 for what the planner refuses, 502 when it fails, and 501 without
// an operator.
func TestOperatorActions(t *testing.T) {
	t.Parallel()
	g := auth.New(auth.Config{Keys: []string{"user"}, AdminKeys: []string{"root"}})
	op := &fakeOperator{}
	srv, _ := newServer(t, console.Config{Guard: g, Operator: op})
	bare, _ := newServer(t, console.Config{Guard: g})
	for _, tc := range []struct {
		name, path, key, body string
		want                  int
		noOperator            bool
	}{
		{"clear needs admin", "clear-cache", "user", `{"id":"decode-0000"}`, http.StatusForbidden, false},
		{"clear without an id", "clear-cache", "root", `{}`, http.StatusBadRequest, false},
		{"clear with an unknown field", "clear-cache", "root", `{"id":"decode-0000","all":true}`, http.StatusBadRequest, false},
		{"clear an unknown worker", "clear-cache", "root", `{"id":"nope"}`, http.StatusNotFound, false},
		{"clear", "clear-cache", "root", `{"id":"decode-0000"}`, http.StatusOK, false},
		{"clear without an operator", "clear-cache", "root", `{"id":"decode-0000"}`, http.StatusNotImplemented, true},
		{"cordon needs admin", "cordon", "user", `{"id":"decode-0000","cordoned":true}`, http.StatusForbidden, false},
		{"cordon an unknown worker", "cordon", "root", `{"id":"nope","cordoned":true}`, http.StatusNotFound, false},
		{"cordon", "cordon", "root", `{"id":"decode-0000","cordoned":true}`, http.StatusOK, false},
		{"rollout refused", "rollout", "root", `{"role":"decode","version":"bad","weight":0.1}`, http.StatusBadRequest, false},
		{"rollout", "rollout", "root", `{"role":"decode","version":"1.2.3","weight":0.1}`, http.StatusOK, false},
		{"end with the planner down", "rollout/end", "root", `{"role":"decode","promote":true}`, http.StatusBadGateway, false},
	} {
		url := srv.URL
		if tc.noOperator {
			url = bare.URL
		}
		if code, body := do(t, http.MethodPost, url+"/console/api/"+tc.path, tc.key, tc.body); code != tc.want {
			t.Errorf("%s: POST %s = %d %s, want %d", tc.name, tc.path, code, body, tc.want)
		}
	}
	if len(op.cleared) != 1 || len(op.cordoned) != 1 {
		t.Errorf("cleared %v, cordoned %v; want decode-0000 once each", op.cleared, op.cordoned)
	}
}
