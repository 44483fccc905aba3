// Package fleettest is an in-memory mesh for the console's tests and
// benchmarks: a discovery listing and fake workers and planners that
// answer over the Connect protocol through an in-process transport, so
// hundreds of workers cost no sockets.
package fleettest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	plannerv1 "switchyard.dev/gen/switchyard/planner/v1"
	"switchyard.dev/gen/switchyard/planner/v1/plannerv1connect"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/mesh/discovery"
)

// Mesh is a fake discovery listing plus the services behind it.
type Mesh struct {
	mu       sync.Mutex
	ins      []discovery.Instance
	handlers map[string]http.Handler // by address
	// Calls counts requests served.
	Calls atomic.Int64
}

// New returns an empty mesh.
func New() *Mesh { return &Mesh{handlers: make(map[string]http.Handler)} }

// Instances implements fleet.Lister.
func (m *Mesh) Instances(_ context.Context, role string) ([]discovery.Instance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []discovery.Instance
	for _, in := range m.ins {
		if in.Role == role {
			out = append(out, in.Clone())
		}
	}
	return out, nil
}

// Add lists in; h, when not nil, answers at its address.
func (m *Mesh) Add(in discovery.Instance, h http.Handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ins = append(m.ins, in)
	if h != nil {
		m.handlers[in.Address] = h
	}
}

// Remove unlists the instance id.
func (m *Mesh) Remove(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ins = slices.DeleteFunc(m.ins, func(in discovery.Instance) bool { return in.ID == id })
}

// AddWorker lists a decode worker n (address worker-n:1) serving w.
func (m *Mesh) AddWorker(n int, w *Worker) discovery.Instance {
	in := discovery.Instance{
		ID: fmt.Sprintf("decode-%04d", n), Role: discovery.RoleDecode, Model: "tiny", Version: "v1",
		Address: fmt.Sprintf("worker-%d:1", n), Meta: map[string]string{discovery.MetaKVHostBlocks: "4096"},
	}
	_, h := workerv1connect.NewWorkerServiceHandler(w)
	m.Add(in, h)
	return in
}

// HTTPClient reaches the mesh's handlers in process, by host:port.
func (m *Mesh) HTTPClient() *http.Client { return &http.Client{Transport: transport{m}} }

type transport struct{ m *Mesh }

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.m.mu.Lock()
	h := t.m.handlers[r.URL.Host]
	t.m.mu.Unlock()
	if h == nil {
		return nil, fmt.Errorf("fleettest: no service at %s", r.URL.Host)
	}
	t.m.Calls.Add(1)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// Worker is a fake WorkerService whose GetLoad answers Load.
type Worker struct {
	workerv1connect.UnimplementedWorkerServiceHandler
	mu   sync.Mutex
	load *workerv1.GetLoadResponse
	// Fail makes GetLoad fail.
	Fail atomic.Bool
}

// NewWorker returns a worker reporting load.
func NewWorker(load *workerv1.GetLoadResponse) *Worker { return &Worker{load: load} }

// SetLoad changes what GetLoad answers.
func (w *Worker) SetLoad(load *workerv1.GetLoadResponse) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.load = load
}

// GetLoad implements WorkerServiceHandler.
func (w *Worker) GetLoad(context.Context, *connect.Request[workerv1.GetLoadRequest]) (*connect.Response[workerv1.GetLoadResponse], error) {
	if w.Fail.Load() {
		return nil, connect.NewError(connect.CodeUnavailable, fmt.Errorf("fake worker down"))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return connect.NewResponse(w.load), nil
}

// Planner is a fake PlannerService answering Plan, and Rollouts when
// set (else Unimplemented, as a planner older than rollouts).
type Planner struct {
	plannerv1connect.UnimplementedPlannerServiceHandler
	Plan     *plannerv1.GetPlanResponse
	Rollouts *plannerv1.GetRolloutsResponse
}

// GetRollouts implements PlannerServiceHandler.
func (p *Planner) GetRollouts(context.Context, *connect.Request[plannerv1.GetRolloutsRequest]) (*connect.Response[plannerv1.GetRolloutsResponse], error) {
	if p.Rollouts == nil {
		return nil, connect.NewError(connect.CodeUnimplemented, fmt.Errorf("fake planner without rollouts"))
	}
	return connect.NewResponse(p.Rollouts), nil
}

// SetMeta replaces the meta of the listed instance id.
func (m *Mesh) SetMeta(id string, meta map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.ins {
		if m.ins[i].ID == id {
			m.ins[i].Meta = meta
		}
	}
}

// GetPlan implements PlannerServiceHandler.
func (p *Planner) GetPlan(context.Context, *connect.Request[plannerv1.GetPlanRequest]) (*connect.Response[plannerv1.GetPlanResponse], error) {
	return connect.NewResponse(p.Plan), nil
}

// AddPlanner lists a planner serving a plan that wants desired decode
// workers of model tiny.
func (m *Mesh) AddPlanner(observed, desired uint32) *Planner {
	p := &Planner{Plan: &plannerv1.GetPlanResponse{
		Reason: "planning", Leader: true, DecidedAt: timestamppb.Now(),
		Pools: []*plannerv1.PoolStatus{{
			Model: "tiny", Role: discovery.RoleDecode, Observed: observed, Desired: desired,
			Rule: "reactive", Reason: "ttft p90 over target",
		}},
	}}
	_, h := plannerv1connect.NewPlannerServiceHandler(p)
	m.Add(discovery.Instance{ID: "planner-0", Role: discovery.RolePlanner, Version: "v1", Address: "planner-0:1"}, h)
	return p
}
