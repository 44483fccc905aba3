package consuldisc

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
)

// fakeAgent is an in-memory Consul agent for the reconcile and watch
// loops' unit tests: services with one TTL check each, a catalog index
// that grows with every change, blocking queries, and the faults the
// loops must survive (an agent that is down, one that restarted and
// forgot everything, with its index back at the start).
type fakeAgent struct {
	mu       sync.Mutex
	services map[string]*api.AgentServiceRegistration // by service id
	checks   map[string]string                        // check id → status
	outputs  map[string]string                        // check id → output, when not ""
	index    uint64
	changed  chan struct{} // closed and replaced on every change
	down     bool
	calls    []call
}

type call struct {
	op string
	at time.Time
}

var errDown = errors.New("fake agent: connection refused")

func newFakeAgent() *fakeAgent {
	return &fakeAgent{services: map[string]*api.AgentServiceRegistration{}, checks: map[string]string{}, outputs: map[string]string{}, index: 10, changed: make(chan struct{})}
}

// enter records a call and fails it while the agent is down; mu held.
func (f *fakeAgent) enter(op string) error {
	f.calls = append(f.calls, call{op, time.Now()})
	if f.down {
		return errDown
	}
	return nil
}

func (f *fakeAgent) bump() {
	f.index++
	close(f.changed)
	f.changed = make(chan struct{})
}

// setDown takes the agent down or back up; going down fails the blocking
// queries in flight, as their connections drop.
func (f *fakeAgent) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
	if down {
		close(f.changed)
		f.changed = make(chan struct{})
	}
}

// restart forgets every service and check and starts the index over.
func (f *fakeAgent) restart() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.services)
	clear(f.checks)
	clear(f.outputs)
	f.index = 1
	close(f.changed)
	f.changed = make(chan struct{})
}

// put registers svc as another process would.
func (f *fakeAgent) put(svc *api.AgentServiceRegistration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.putLocked(svc)
}

func (f *fakeAgent) putLocked(svc *api.AgentServiceRegistration) {
	for id, s := range f.services {
		if id == svc.ID && s.Check != nil {
			delete(f.checks, s.Check.CheckID)
			delete(f.outputs, s.Check.CheckID)
		}
	}
	c := *svc
	c.Meta = maps.Clone(svc.Meta)
	if svc.Check != nil {
		chk := *svc.Check
		c.Check = &chk
		f.checks[chk.CheckID] = chk.Status
		delete(f.outputs, chk.CheckID)
	}
	f.services[svc.ID] = &c
	f.bump()
}

// service returns the registered service of id, or nil, and its status.
func (f *fakeAgent) service(id string) (*api.AgentServiceRegistration, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.services[id]
	if s == nil {
		return nil, ""
	}
	return s, f.checks[s.Check.CheckID]
}

// times returns when each call of op was made.
func (f *fakeAgent) times(op string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []time.Time
	for _, c := range f.calls {
		if c.op == op {
			out = append(out, c.at)
		}
	}
	return out
}

func (f *fakeAgent) Leader(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("leader"); err != nil {
		return "", err
	}
	return "127.0.0.1:8300", nil
}

func (f *fakeAgent) ServiceHealth(_ context.Context, id string) (string, *api.AgentService, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("health"); err != nil {
		return "", nil, err
	}
	s := f.services[id]
	if s == nil {
		return api.HealthCritical, nil, nil
	}
	return f.checks[s.Check.CheckID], &api.AgentService{ID: s.ID, Service: s.Name, Meta: maps.Clone(s.Meta)}, nil
}

func (f *fakeAgent) Register(_ context.Context, svc *api.AgentServiceRegistration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("register"); err != nil {
		return err
	}
	f.putLocked(svc)
	return nil
}

func (f *fakeAgent) UpdateTTL(_ context.Context, checkID, status string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("ttl"); err != nil {
		return err
	}
	if _, ok := f.checks[checkID]; !ok {
		return errors.New(`Unexpected response code: 404 (CheckID "` + checkID + `" does not have associated TTL)`)
	}
	if f.checks[checkID] != status || f.outputs[checkID] != "" {
		f.checks[checkID] = status
		delete(f.outputs, checkID)
		f.bump()
	}
	return nil
}

// lapse turns a TTL check critical as the agent does when its TTL runs
// out (or when it resumes from a pause and finds it overdue).
func (f *fakeAgent) lapse(checkID string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.checks[checkID] = api.HealthCritical
	f.outputs[checkID] = "TTL expired"
	f.bump()
}

// checkOf returns the id of the heartbeat check of service id.
func (f *fakeAgent) checkOf(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.services[id].Check.CheckID
}

func (f *fakeAgent) Deregister(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("deregister"); err != nil {
		return err
	}
	if s, ok := f.services[id]; ok {
		delete(f.checks, s.Check.CheckID)
		delete(f.outputs, s.Check.CheckID)
		delete(f.services, id)
		f.bump()
	}
	return nil
}

func (f *fakeAgent) Entries(ctx context.Context, name string, index uint64, wait time.Duration) ([]*api.ServiceEntry, uint64, error) {
	f.mu.Lock()
	if err := f.enter("passing"); err != nil {
		f.mu.Unlock()
		return nil, 0, err
	}
	if index > 0 && index >= f.index { // block until a change, the wait or ctx
		ch := f.changed
		f.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, 0, ctx.Err()
		}
		t.Stop()
		f.mu.Lock()
		if f.down {
			f.mu.Unlock()
			return nil, 0, errDown
		}
	}
	defer f.mu.Unlock()
	var out []*api.ServiceEntry
	for _, id := range slices.Sorted(maps.Keys(f.services)) {
		s := f.services[id]
		if s.Name != name {
			continue
		}
		chk := s.Check.CheckID
		out = append(out, &api.ServiceEntry{
			Service: &api.AgentService{
				ID: s.ID, Service: s.Name, Address: s.Address, Port: s.Port, Tags: slices.Clone(s.Tags), Meta: maps.Clone(s.Meta),
			},
			Checks: api.HealthChecks{
				{CheckID: "serfHealth", Status: api.HealthPassing, Output: "Agent alive and reachable"},
				{CheckID: chk, ServiceID: s.ID, Type: "ttl", Status: f.checks[chk], Output: f.outputs[chk]},
			},
		})
	}
	return out, f.index, nil
}
