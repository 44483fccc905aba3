package upstreamtest

import (
	"context"
	"sync"

	"switchyard.dev/libs/mesh/discovery"
)

// Registry is an in-memory discovery.Registry whose instances tests set
// directly with Set.
type Registry struct {
	mu       sync.Mutex
	byRole   map[string][]discovery.Instance
	watchers map[string][]chan []discovery.Instance
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byRole: map[string][]discovery.Instance{}, watchers: map[string][]chan []discovery.Instance{}}
}

// Set replaces the healthy instances of role and notifies watchers.
func (r *Registry) Set(role string, ins ...discovery.Instance) {
	discovery.SortInstances(ins)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byRole[role] = ins
	for _, ch := range r.watchers[role] {
		discovery.SendLatest(ch, ins)
	}
}

// Register is not used by the frontend's tests.
func (r *Registry) Register(context.Context, discovery.Instance) (discovery.Registration, error) {
	return nil, discovery.ErrNotFound
}

// Instances implements discovery.Registry.
func (r *Registry) Instances(_ context.Context, role string) ([]discovery.Instance, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byRole[role], nil
}

// Watch implements discovery.Registry.
func (r *Registry) Watch(ctx context.Context, role string) (<-chan []discovery.Instance, error) {
	ch := make(chan []discovery.Instance, 1)
	out := make(chan []discovery.Instance, 1)
	r.mu.Lock()
	r.watchers[role] = append(r.watchers[role], ch)
	discovery.SendLatest(ch, r.byRole[role])
	r.mu.Unlock()
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case v := <-ch:
				select {
				case out <- v:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// WorkerInstance is the discovery record of a fake worker.
func WorkerInstance(w *Worker) discovery.Instance {
	return discovery.Instance{ID: w.cfg.ID, Role: discovery.RoleDecode, Model: w.cfg.Model, Address: w.URL[len("http://"):]}
}
