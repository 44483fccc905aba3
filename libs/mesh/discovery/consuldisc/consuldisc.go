// Package consuldisc is the Consul discovery backend for clusters.
//
// Each instance is a Consul agent service named "<prefix><role>", with
// the service id "<prefix><instance id>" (ids are unique per agent, so
// meshes with different prefixes sharing an agent keep theirs apart), and
// a TTL check. A reconcile loop owns the registration: it heartbeats the check,
// and when the heartbeat fails (the agent restarted and forgot us, or the
// check was reaped) it registers again with capped exponential backoff,
// logging the first and every tenth failure. If the process dies, the check
// goes critical after one TTL and Consul reaps the service after
// DeregisterCriticalAfter.
//
// Watches are blocking queries on the health endpoint that list every
// instance with its checks, not only the passing ones, because why an
// instance stopped passing decides when a watch drops it. One that is
// deregistered (absent from the catalog: it left, or drained and left) or
// that set itself critical (SetHealth, before draining) is dropped at
// once. One whose heartbeat check lapsed ("TTL expired"), or that an
// answer lacks after the agent's index went back (a restart, or a rebuilt
// view), is kept for Config.LapseWindow and dropped only if it has not
// passed again by then: that is what every instance looks like for a few
// milliseconds when the agent itself was paused for longer than the TTL,
// and acting on it emptied every watch of the mesh at once (docs/chaos.md).
// A dead instance therefore leaves watches CheckTTL + LapseWindow after
// its last heartbeat (14.3 s with the defaults). Instances, a one-off
// list, has no earlier answer to hold on to and lists the passing ones.
package consuldisc

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"switchyard.dev/libs/mesh/backoff"
	"switchyard.dev/libs/mesh/discovery"
)

// Meta keys that carry the Instance fields Consul has no place for.
const (
	metaRole    = "switchyard_role"
	metaModel   = "switchyard_model"
	metaVersion = "switchyard_version"
	// metaOwner is a random token of the registration: a registration
	// replaces or deregisters the agent's service only while it is its own
	// (two processes given the same -id on one agent).
	metaOwner = "switchyard_owner"
)

// Config configures the Consul backend.
type Config struct {
	// Address of the Consul agent's HTTP API, e.g. "127.0.0.1:8500".
	Address string
	// Token is an optional ACL token.
	Token string
	// ServicePrefix prefixes role names to form service names (default "switchyard-").
	ServicePrefix string
	// CheckTTL is the TTL of the health check (default 10s).
	CheckTTL time.Duration
	// DeregisterCriticalAfter reaps dead instances (default 1m, Consul's minimum).
	DeregisterCriticalAfter time.Duration
	// WatchWait bounds one blocking query (default 30s).
	WatchWait time.Duration
	// LapseWindow is how long a watch keeps listing an instance whose
	// heartbeat check lapsed, or that the agent lost track of, before it
	// drops it (default a third of CheckTTL, one heartbeat interval, plus
	// a second; negative: drop at once). A dead instance thus leaves
	// watches CheckTTL + LapseWindow after its last heartbeat.
	LapseWindow time.Duration
	// MaxBackoff caps the retry delay of the reconcile and watch loops (default 10s).
	MaxBackoff time.Duration
	// Rand draws the retry delays' jitter; nil means math/rand/v2. It is
	// shared by every loop of the registry, so it must be safe for
	// concurrent use.
	Rand   backoff.Source
	Logger *slog.Logger
}

// Registry is a discovery.Registry over a Consul agent.
type Registry struct {
	cfg   Config
	agent agent
}

// New connects to the agent and checks that it answers, so a wrong address
// fails at start-up, not at the first heartbeat.
func New(ctx context.Context, cfg Config) (*Registry, error) {
	if cfg.ServicePrefix == "" {
		cfg.ServicePrefix = "switchyard-"
	}
	if cfg.CheckTTL <= 0 {
		cfg.CheckTTL = 10 * time.Second
	}
	if cfg.DeregisterCriticalAfter <= 0 {
		cfg.DeregisterCriticalAfter = time.Minute
	}
	if cfg.WatchWait <= 0 {
		cfg.WatchWait = 30 * time.Second
	}
	if cfg.LapseWindow == 0 {
		cfg.LapseWindow = cfg.CheckTTL/3 + lapseSlack
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	acfg := api.DefaultNonPooledConfig()
	acfg.Address = cfg.Address
	acfg.Token = cfg.Token
	client, err := api.NewClient(acfg)
	if err != nil {
		return nil, fmt.Errorf("consul address %q: %w", cfg.Address, err)
	}
	return newRegistry(ctx, cfg, httpAgent{client})
}

// newRegistry checks that a answers and returns a Registry over it.
func newRegistry(ctx context.Context, cfg Config, a agent) (*Registry, error) {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := a.Leader(pctx); err != nil {
		return nil, fmt.Errorf("consul address %q unreachable: %w", cfg.Address, err)
	}
	return &Registry{cfg: cfg, agent: a}, nil
}

func (r *Registry) serviceName(role string) string { return r.cfg.ServicePrefix + role }

// backoff is the retry schedule of one reconcile or watch loop.
func (r *Registry) backoff() *backoff.Backoff {
	return backoff.New(backoff.Policy{Base: retryBase, Max: r.cfg.MaxBackoff}, r.cfg.Rand)
}

// retryBase is the ceiling of a loop's first retry delay.
const retryBase = 100 * time.Millisecond

// serviceID is the agent's service id of instance id. Service ids are
// unique per agent, across service names: two meshes (prefixes) sharing
// an agent would otherwise take each other's instances of one id.
func (r *Registry) serviceID(id string) string { return r.cfg.ServicePrefix + id }

// instanceID inverts serviceID (ids registered before the prefix was
// added come back unchanged).
func (r *Registry) instanceID(serviceID string) string {
	return strings.TrimPrefix(serviceID, r.cfg.ServicePrefix)
}

func (r *Registry) agentService(in discovery.Instance, checkID, owner string) (*api.AgentServiceRegistration, error) {
	host, portStr, _ := net.SplitHostPort(in.Address)
	port, _ := strconv.Atoi(portStr)
	meta, err := serviceMeta(in.Meta, in.Role, in.Model, in.Version, owner)
	if err != nil {
		return nil, err
	}
	return &api.AgentServiceRegistration{
		ID:      r.serviceID(in.ID),
		Name:    r.serviceName(in.Role),
		Address: host,
		Port:    port,
		Tags:    slices.Clone(in.Tags),
		Meta:    meta,
		Check: &api.AgentServiceCheck{
			CheckID:                        checkID,
			Name:                           "switchyard heartbeat",
			TTL:                            r.cfg.CheckTTL.String(),
			Status:                         api.HealthPassing,
			DeregisterCriticalServiceAfter: r.cfg.DeregisterCriticalAfter.String(),
		},
	}, nil
}

// serviceMeta is the agent service's meta: the instance's own, checked,
// and the keys that carry the Instance fields Consul has no place for.
func serviceMeta(own map[string]string, role, model, version, owner string) (map[string]string, error) {
	meta := maps.Clone(own)
	if meta == nil {
		meta = map[string]string{}
	}
	for k := range meta {
		if !validMetaKey(k) {
			return nil, fmt.Errorf("consuldisc: meta key %q: want [A-Za-z0-9_-]{1,128}", k)
		}
		if reservedMetaKey(k) {
			return nil, fmt.Errorf("consuldisc: meta key %q is the backend's own", k)
		}
	}
	meta[metaRole], meta[metaModel], meta[metaVersion], meta[metaOwner] = role, model, version, owner
	return meta, nil
}

// reservedMetaKey reports whether k carries an Instance field (or the
// owner token) in the agent service's meta: an instance's own meta of
// that key would be overwritten, and not come back from a watch.
func reservedMetaKey(k string) bool {
	return k == metaRole || k == metaModel || k == metaVersion || k == metaOwner
}

func validMetaKey(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for _, c := range k {
		ok := c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// Register registers in with the agent and starts the reconcile loop. If the
// first registration fails, nothing is left behind.
func (r *Registry) Register(ctx context.Context, in discovery.Instance) (discovery.Registration, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	// The check is this registration's own: a process whose id another
	// instance took over finds its heartbeat refused, rather than marking
	// the newcomer's check.
	owner := rand.Text()
	checkID := checkIDPrefix + in.ID + ":" + owner
	svc, err := r.agentService(in, checkID, owner)
	if err != nil {
		return nil, err
	}
	g := &registration{r: r, svc: svc, checkID: checkID, status: api.HealthPassing}
	if owner, passing, err := g.holder(ctx); err != nil {
		return nil, fmt.Errorf("consul register %s: %w", in.ID, err)
	} else if owner != "" && passing {
		return nil, fmt.Errorf("%w: %q is registered with this Consul agent by a passing instance", discovery.ErrIDTaken, in.ID)
	}
	if err := g.register(ctx); err != nil {
		return nil, fmt.Errorf("consul register %s: %w", in.ID, err)
	}
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g.cancel = cancel
	go g.reconcile(ctx, loopCtx)
	return g, nil
}

func fromEntry(s *api.AgentService) discovery.Instance {
	meta := maps.Clone(s.Meta)
	in := discovery.Instance{
		ID:      s.ID,
		Role:    meta[metaRole],
		Model:   meta[metaModel],
		Version: meta[metaVersion],
		Address: net.JoinHostPort(s.Address, strconv.Itoa(s.Port)),
		Tags:    slices.Clone(s.Tags),
	}
	delete(meta, metaRole)
	delete(meta, metaModel)
	delete(meta, metaVersion)
	delete(meta, metaOwner)
	if len(meta) > 0 {
		in.Meta = meta
	}
	if len(in.Tags) == 0 {
		in.Tags = nil
	}
	return in
}

var errGone = errors.New("consuldisc: deregistered")

// checkIDPrefix begins the id of every heartbeat check the backend
// registers, so a watch knows its own TTL checks from others.
const checkIDPrefix = "switchyard:"
