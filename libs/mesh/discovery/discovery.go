// Package discovery is how Switchyard services find each other.
//
// A service registers itself (role, model, version, tags, address) and keeps
// the registration alive; clients watch the healthy instances of a role. The
// interface is small on purpose so that every backend (Consul for clusters,
// files for one machine) passes one contract suite (package disctest), and
// callers never learn which backend they run on.
//
// Invariants every backend keeps:
//   - Watch delivers the full current set of healthy instances of a role,
//     sorted by ID, first at once and then on every change; a slow reader
//     only ever misses intermediate states, never the latest one.
//   - An instance that deregisters or sets itself Critical leaves watches
//     at once.
//   - An instance whose process died disappears within the backend's lease
//     or check interval, plus its confirmation window where it has one,
//     without anyone deregistering it. A backend whose own outage can fail
//     every instance at once (consuldisc: an agent resuming from a pause
//     finds every check overdue) confirms such a drop over a short window
//     before a watch reports it, so an outage of the backend alone never
//     empties a watch.
//   - Deregister is idempotent.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Well-known roles.
const (
	RoleFrontend       = "frontend"
	RoleRouter         = "router"
	RolePrefill        = "prefill"
	RoleDecode         = "decode"
	RoleKVBMController = "kvbm-controller"
	RolePlanner        = "planner"
)

// TagCanary marks an instance that takes canary traffic.
const TagCanary = "canary"

// Meta keys workers publish about their KV cache, read by the router and
// the kvbm-controller.
const (
	MetaKVBlocks  = "kv_blocks"  // KV blocks in the worker's pool
	MetaBlockSize = "block_size" // tokens per KV block
	// MetaKVHostBlocks and MetaKVDiskBlocks are the capacities of the
	// worker's KV tiers below its pool (libs/kvbm), when it has them.
	MetaKVHostBlocks = "kv_host_blocks"
	MetaKVDiskBlocks = "kv_disk_blocks"
	// MetaKVSharedBlocks is set on a worker that loads from the shared
	// object-store tier: how many of its blocks it keeps track of. The
	// router credits the shared tier only to such workers.
	MetaKVSharedBlocks = "kv_shared_blocks"
	// MetaKVLoadNanos is a worker's measured time to load one block from
	// each of its lower tiers (kvtier.Times: "host=84000,disk=350000"),
	// and MetaKVPrefillBlockNanos its measured time to prefill one: the
	// router credits a block in a tier with the share of its prefill that
	// loading it saves. Both are republished as the measurements move.
	MetaKVLoadNanos         = "kv_load_ns"
	MetaKVPrefillBlockNanos = "kv_prefill_block_ns"
	// MetaKVTransfer is where a worker with a KV transfer agent publishes
	// the agent's endpoint digest (libs/nixl metadata.Agent.Endpoints): its
	// name, run and backend addresses. Workers that publish it can move KV
	// between them (remote prefill, prefix pull).
	MetaKVTransfer = "kv_transfer_endpoints"
	// MetaPrefixPull is "1" on a worker that copies a prompt's prefix from
	// a peer when the router names one (a transfer agent and
	// disaggregation not turned off); MetaKVTransfer alone means it can
	// only be copied from.
	MetaPrefixPull = "prefix_pull"
	// MetaSharedTier is "1" on a kvbm-controller that keeps the catalog
	// of a shared object-store tier: routers follow its event stream.
	MetaSharedTier = "kv_shared_tier"
	// MetaTLS is "1" on an instance that serves TLS (mutual TLS between
	// services): its URL is https, and callers must present a
	// certificate.
	MetaTLS = "tls"
	// MetaRollouts is published by the leading planner: the canary
	// rollouts in force, per role (package canary reads and writes it;
	// empty: none). Frontends and routers split traffic by it.
	MetaRollouts = "rollouts"
	// MetaCordoned is "1" on a worker an operator cordoned
	// (WorkerService.SetCordon): it stays up and registered, and routers
	// send it no new requests.
	MetaCordoned = "cordoned"
)

// Instance is one registered service instance.
type Instance struct {
	// ID is unique across the mesh, e.g. "decode-7f3a9c".
	ID string `json:"id"`
	// Role is one of the Role constants.
	Role string `json:"role"`
	// Model is the served model name (workers), or empty.
	Model string `json:"model,omitempty"`
	// Version is the build version of the service.
	Version string `json:"version"`
	// Address is the host:port of the service's Connect endpoint.
	Address string `json:"address"`
	// Tags are free labels such as "canary".
	Tags []string `json:"tags,omitempty"`
	// Meta is published key/value data (KV capacity, block size, GPUs...).
	Meta map[string]string `json:"meta,omitempty"`
}

// URL is the instance's Connect base URL: https for an instance that
// publishes MetaTLS, otherwise http (h2c).
func (in Instance) URL() string {
	if in.Meta[MetaTLS] == "1" {
		return "https://" + in.Address
	}
	return "http://" + in.Address
}

// HasTag reports whether the instance carries tag.
func (in Instance) HasTag(tag string) bool { return slices.Contains(in.Tags, tag) }

// Clone returns a deep copy.
func (in Instance) Clone() Instance {
	in.Tags = slices.Clone(in.Tags)
	in.Meta = maps.Clone(in.Meta)
	return in
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// ValidID reports whether id can name an instance (or a role): 1-128 of
// [A-Za-z0-9_.-], not starting with a punctuation mark.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Validate checks that the instance can be registered.
func (in Instance) Validate() error {
	if !idPattern.MatchString(in.ID) {
		return fmt.Errorf("discovery: instance id %q: want 1-128 of [A-Za-z0-9_.-]", in.ID)
	}
	if !idPattern.MatchString(in.Role) {
		return fmt.Errorf("discovery: role %q: want 1-128 of [A-Za-z0-9_.-]", in.Role)
	}
	host, port, err := net.SplitHostPort(in.Address)
	if err != nil || host == "" {
		return fmt.Errorf("discovery: address %q: want host:port", in.Address)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("discovery: address %q: bad port", in.Address)
	}
	return nil
}

// Health is what a registration reports about its instance.
type Health int

const (
	// Passing means the instance takes traffic.
	Passing Health = iota
	// Critical means the instance is registered but must not get traffic (for
	// example while it drains before shutdown).
	Critical
)

// Registration keeps one instance registered until Deregister.
type Registration interface {
	// SetHealth changes what watchers see: only Passing instances are listed.
	SetHealth(ctx context.Context, h Health) error
	// SetMeta replaces the instance's published meta: what a worker
	// measures while it runs (its KV tiers' load times) reaches watchers
	// without a new registration.
	SetMeta(ctx context.Context, meta map[string]string) error
	// Deregister removes the instance and stops keeping it alive.
	Deregister(ctx context.Context) error
}

// Registry is the interface every backend implements.
type Registry interface {
	// Register publishes in and keeps it alive until the returned
	// registration is deregistered or ctx ends. The instance starts Passing.
	Register(ctx context.Context, in Instance) (Registration, error)
	// Watch sends the healthy instances of role, at once and on change,
	// until ctx ends; then it closes the channel.
	Watch(ctx context.Context, role string) (<-chan []Instance, error)
	// Instances lists the healthy instances of role now.
	Instances(ctx context.Context, role string) ([]Instance, error)
}

// ErrNotFound is returned for operations on an unknown instance.
var ErrNotFound = errors.New("discovery: instance not found")

// ErrIDTaken is returned by Register when a live instance of another
// process already holds the id (two processes given the same -id).
var ErrIDTaken = errors.New("discovery: instance id taken by a live instance")

// SharedTierController returns the kvbm-controller that owns the shared
// tier's catalog: the first of ins (sorted by ID, as Watch delivers
// them) that publishes MetaSharedTier. Routers follow its stream and
// workers report to it.
func SharedTierController(ins []Instance) (Instance, bool) {
	for _, in := range ins {
		if in.Meta[MetaSharedTier] == "1" {
			return in, true
		}
	}
	return Instance{}, false
}

// SortInstances orders instances by ID, the order Watch delivers.
func SortInstances(ins []Instance) {
	slices.SortFunc(ins, func(a, b Instance) int { return strings.Compare(a.ID, b.ID) })
}

// Equal reports whether two sorted instance lists are the same.
func Equal(a, b []Instance) bool {
	return slices.EqualFunc(a, b, func(x, y Instance) bool {
		return x.ID == y.ID && x.Role == y.Role && x.Model == y.Model &&
			x.Version == y.Version && x.Address == y.Address &&
			slices.Equal(x.Tags, y.Tags) && maps.Equal(x.Meta, y.Meta)
	})
}
