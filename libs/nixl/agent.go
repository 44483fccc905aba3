package nixl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"

	"switchyard.dev/libs/nixl/metadata"
)

// DefaultPreference is the backend order used when Config.Preference is
// empty: hardware one-sided first, then portable, then same-process.
var DefaultPreference = []string{"ucx", "tcp", "local"}

// Config configures an Agent.
type Config struct {
	Name     string           // unique among peers; published in metadata
	Backends []BackendFactory // at least one, unless Storage has one
	// Storage are the backends for the agent's own storage (RegisterStorage),
	// at most one a SegKind; never advertised to peers.
	Storage []StorageFactory
	// Preference orders backend names when picking one per peer; nil means
	// DefaultPreference. Backends not listed are tried last, by name.
	Preference []string
	Logger     *slog.Logger // nil discards
	// OnChange is called when the agent's endpoints change while it runs
	// (a backend failed for good): re-publish Endpoints and Metadata.
	OnChange func()
}

// Agent is one worker's endpoint for KV transfers.
type Agent struct {
	name     string
	log      *slog.Logger
	backends []Backend // in preference order
	storage  []StorageBackend
	regions  *regionTable
	notifs   notifQueue
	// epoch names this run in metadata; gen counts (de)registrations, so
	// peers can drop a stale blob that arrives after a fresher one.
	epoch uint64
	gen   atomic.Uint64

	mu     sync.Mutex
	peers  map[string]*peer
	closed bool
}

type peer struct {
	md      *metadata.Agent
	conn    Conn       // guarded by Agent.mu
	backend Backend    // guarded by Agent.mu
	dial    sync.Mutex // held while connecting to this peer (not Agent.mu)
}

// NewAgent builds an agent and its backends.
func NewAgent(cfg Config) (*Agent, error) {
	if cfg.Name == "" || len(cfg.Name) > metadata.MaxNameLen {
		return nil, fmt.Errorf("nixl: agent name length %d out of range", len(cfg.Name))
	}
	if len(cfg.Backends) == 0 && len(cfg.Storage) == 0 {
		return nil, errors.New("nixl: no backends configured")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Agent{
		name:    cfg.Name,
		log:     log.With("agent", cfg.Name),
		regions: newRegionTable(),
		peers:   map[string]*peer{},
		epoch:   rand.Uint64() | 1, // never 0, which means "unordered" (version 1)
	}
	a.notifs.init(a.log)
	env := Env{Agent: cfg.Name, Logger: a.log, Regions: a.regions, Notify: a.notifs.push, Lost: func(err error) {
		a.log.Error("nixl: a transfer backend failed; falling back to the next one", "err", err)
		a.gen.Add(1) // peers take the blob without it over the one they hold
		if cfg.OnChange != nil {
			cfg.OnChange()
		}
	}}
	for _, f := range cfg.Backends {
		b, err := f(env)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("nixl: agent %s: %w", cfg.Name, err), a.closeBackends())
		}
		a.backends = append(a.backends, b)
	}
	sortBackends(a.backends, cfg.Preference)
	for _, f := range cfg.Storage {
		b, err := f(env)
		if err == nil && a.storageFor(b.Kind()) != nil {
			err = errors.Join(fmt.Errorf("two storage backends for %v", b.Kind()), b.Close())
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("nixl: agent %s: %w", cfg.Name, err), a.closeBackends())
		}
		a.storage = append(a.storage, b)
	}
	return a, nil
}

func sortBackends(bs []Backend, pref []string) {
	if pref == nil {
		pref = DefaultPreference
	}
	rank := func(name string) int {
		for i, p := range pref {
			if p == name {
				return i
			}
		}
		return len(pref)
	}
	sort.SliceStable(bs, func(i, j int) bool {
		ri, rj := rank(bs[i].Name()), rank(bs[j].Name())
		if ri != rj {
			return ri < rj
		}
		return bs[i].Name() < bs[j].Name()
	})
}

// Name returns the agent's name.
func (a *Agent) Name() string { return a.name }

// RegisterMemory registers mem with every backend. mem must stay mapped
// until DeregisterMemory returns and must not be Go heap memory.
func (a *Agent) RegisterMemory(mem []byte) (RegionID, error) {
	if len(mem) == 0 {
		return 0, errors.New("nixl: register empty region")
	}
	id := a.regions.add(mem)
	var keys []metadata.Key
	for i, b := range a.backends {
		if failed(b) { // nothing reaches the region through it
			continue
		}
		key, err := b.RegisterMemory(id, mem)
		if err != nil {
			for _, done := range a.backends[:i] {
				_ = done.DeregisterMemory(id)
			}
			_, _ = a.regions.remove(context.Background(), id)
			return 0, fmt.Errorf("nixl: register with %s: %w", b.Name(), err)
		}
		if key != nil {
			keys = append(keys, metadata.Key{Backend: wireName(b), Key: key})
		}
	}
	a.regions.setKeys(id, keys)
	a.gen.Add(1) // after the region is complete: a blob of this generation lists it
	return id, nil
}

// DeregisterMemory waits for accesses to the region to end (bounded by
// ctx), then removes it from every backend. The region takes no new
// accesses from the first call on, also when that call gives up; calling
// again waits for the accesses still in flight. Peers learn of it through
// fresh metadata; until then their accesses fail with ErrUnknownRegion.
func (a *Agent) DeregisterMemory(ctx context.Context, id RegionID) error {
	if seg, ok := a.regions.segment(id); ok && seg != nil {
		return fmt.Errorf("%w: region %d is storage: DeregisterStorage", ErrUnknownRegion, id)
	}
	removed, err := a.regions.remove(ctx, id)
	if err != nil || !removed {
		return err // !removed: a concurrent call finished it
	}
	a.gen.Add(1)
	var errs []error
	for _, b := range a.backends {
		if failed(b) { // it holds nothing any more
			continue
		}
		if err := b.DeregisterMemory(id); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// Metadata encodes the agent's current connection metadata. Re-publish it
// after registering or deregistering memory. Blobs carry a generation:
// a peer keeps the newest it was given, whatever order they arrive in.
func (a *Agent) Metadata() ([]byte, error) {
	// The generation is read first: a blob lists every region registered,
	// and leaves out every backend lost, up to its generation.
	gen := a.gen.Load()
	md := a.identity()
	md.Gen = gen
	md.Regions = a.regions.snapshot()
	return metadata.Encode(md)
}

// Endpoints is the digest of the agent's name, run and backend addresses
// (metadata.Agent.Endpoints) that every blob it encodes carries.
func (a *Agent) Endpoints() string { return a.identity().Endpoints() }

// identity is the agent's metadata without generation and regions.
func (a *Agent) identity() *metadata.Agent {
	md := &metadata.Agent{Name: a.name, Epoch: a.epoch}
	for _, b := range a.backends {
		if failed(b) {
			continue
		}
		md.Backends = append(md.Backends, metadata.Backend{Name: wireName(b), Address: b.Address()})
	}
	return md
}

// Notified returns a channel that receives a value when notifications
// arrive; drain them with GetNotifs.
func (a *Agent) Notified() <-chan struct{} { return a.notifs.signal }

// GetNotifs returns and clears the notifications received so far.
func (a *Agent) GetNotifs() []Notif { return a.notifs.drain() }

// DroppedNotifs counts the notifications dropped because the queue was
// at its bound (MaxQueuedNotifs, MaxQueuedNotifBytes) when they arrived.
func (a *Agent) DroppedNotifs() uint64 { return a.notifs.droppedCount() }

// Close closes every connection and backend. Transfers still in flight
// end with an error.
func (a *Agent) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	peers := a.peers
	a.peers = map[string]*peer{}
	a.mu.Unlock()
	for _, p := range peers {
		if p.conn != nil {
			_ = p.conn.Close()
		}
	}
	return a.closeBackends()
}

func (a *Agent) closeBackends() error {
	var errs []error
	for _, b := range a.backends {
		if err := b.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b.Name(), err))
		}
	}
	for _, b := range a.storage {
		if err := b.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b.Name(), err))
		}
	}
	return errors.Join(errs...)
}
