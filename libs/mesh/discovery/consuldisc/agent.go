package consuldisc

import (
	"context"
	"time"

	"github.com/hashicorp/consul/api"
)

// agent is the part of a Consul agent's HTTP API that the backend calls.
// The reconcile and watch loops reach Consul only through it, so their
// logic (re-registration, backoff, id ownership, index resets) is tested
// against an in-memory agent (fake_test.go) as well as a real one.
type agent interface {
	// Leader returns the cluster leader's address; it fails when the
	// agent does not answer.
	Leader(ctx context.Context) (string, error)
	// ServiceHealth returns the aggregate check status of the agent's
	// service id and the service, or a nil service when the agent has
	// none of that id.
	ServiceHealth(ctx context.Context, serviceID string) (status string, svc *api.AgentService, err error)
	// Register registers (or replaces) a service and its check.
	Register(ctx context.Context, svc *api.AgentServiceRegistration) error
	// UpdateTTL sets a TTL check's status; it fails when the agent does
	// not know the check.
	UpdateTTL(ctx context.Context, checkID, status string) error
	// Deregister removes a service from the agent.
	Deregister(ctx context.Context, serviceID string) error
	// Entries lists every instance of a service name with its checks,
	// passing or not, blocking up to wait while the catalog's index is
	// still index; it returns the index of the answer. (Not passing-only:
	// the watch tells a lapsed heartbeat from a deregistration by it.)
	Entries(ctx context.Context, service string, index uint64, wait time.Duration) ([]*api.ServiceEntry, uint64, error)
}

// httpAgent is agent over Consul's HTTP API client.
type httpAgent struct{ c *api.Client }

func opts(ctx context.Context) *api.QueryOptions { return (&api.QueryOptions{}).WithContext(ctx) }

func (a httpAgent) Leader(ctx context.Context) (string, error) {
	return a.c.Status().LeaderWithQueryOptions(opts(ctx))
}

func (a httpAgent) ServiceHealth(ctx context.Context, serviceID string) (string, *api.AgentService, error) {
	status, info, err := a.c.Agent().AgentHealthServiceByIDOpts(serviceID, opts(ctx))
	if err != nil || info == nil {
		return status, nil, err
	}
	return status, info.Service, nil
}

func (a httpAgent) Register(ctx context.Context, svc *api.AgentServiceRegistration) error {
	return a.c.Agent().ServiceRegisterOpts(svc, api.ServiceRegisterOpts{ReplaceExistingChecks: true}.WithContext(ctx))
}

func (a httpAgent) UpdateTTL(ctx context.Context, checkID, status string) error {
	return a.c.Agent().UpdateTTLOpts(checkID, "", status, opts(ctx))
}

func (a httpAgent) Deregister(ctx context.Context, serviceID string) error {
	return a.c.Agent().ServiceDeregisterOpts(serviceID, opts(ctx))
}

func (a httpAgent) Entries(ctx context.Context, service string, index uint64, wait time.Duration) ([]*api.ServiceEntry, uint64, error) {
	entries, meta, err := a.c.Health().Service(service, "", false, (&api.QueryOptions{WaitIndex: index, WaitTime: wait}).WithContext(ctx))
	if err != nil {
		return nil, 0, err
	}
	return entries, meta.LastIndex, nil
}
