// Package filedisc is the embedded discovery backend for one machine: a
// directory of JSON records, one per instance, each with a lease.
//
// Layout: <dir>/<role>/<id>.json. A record lists as healthy only while its
// lease has not expired, its health is passing, and (when written on this
// host) its process is still alive, so an instance that crashes disappears
// at once and a hung or remote one within the lease. Records are written
// atomically (temp file + rename); readers skip files they cannot parse.
package filedisc

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"switchyard.dev/libs/mesh/backoff"
	"switchyard.dev/libs/mesh/discovery"
)

// Config configures a file registry.
type Config struct {
	// Dir holds the records; it is created if missing.
	Dir string
	// Lease is how long a record stays valid without renewal (default 5s).
	Lease time.Duration
	// PollInterval is how often watchers rescan (default 200ms).
	PollInterval time.Duration
	Logger       *slog.Logger
}

// Registry is a discovery.Registry over a directory.
type Registry struct {
	cfg      Config
	hostname string
	now      func() time.Time

	// seen holds, per role, the live records the last listing read, so a
	// record that vanishes from disk without a tombstone (its directory
	// removed under running services) stays listed until its lease ends
	// or its process is gone, instead of dropping out until its renewal
	// writes it back.
	mu   sync.Mutex
	seen map[string]map[string]record
}

// record is the on-disk form of an instance.
// staleLeases is how many leases past its expiry a record is removed.
const staleLeases = 10

type record struct {
	discovery.Instance
	PID      int       `json:"pid"`
	Host     string    `json:"host"`
	Expires  time.Time `json:"expires"`
	Critical bool      `json:"critical,omitempty"`
	// Owner is a random token of the registration that wrote the record:
	// a registration rewrites or removes only its own record, so a second
	// process given the same id cannot flip or delete the first's.
	Owner string `json:"owner,omitempty"`
	// Gone marks a tombstone: the record of a registration that
	// deregistered, left so listings drop it at once rather than keep it
	// to its lease's end as a record that vanished (Registry.seen). It is
	// removed staleLeases leases later, like any dead record.
	Gone bool `json:"gone,omitempty"`
}

// readRecord returns the record at path, if there is a readable one.
func readRecord(path string) (record, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return record{}, false
	}
	return decodeRecord(b)
}

// decodeRecord parses a record file. Anything but a record whose
// instance could have been registered (Instance.Validate) is garbage: a
// file half-written by hand or by another program, which no watcher
// should be handed as a peer to dial.
func decodeRecord(b []byte) (record, bool) {
	var rec record
	if json.Unmarshal(b, &rec) != nil || rec.Validate() != nil {
		return record{}, false
	}
	return rec, true
}

// New returns a registry over cfg.Dir, creating it if needed.
func New(cfg Config) (*Registry, error) {
	if cfg.Dir == "" {
		return nil, errors.New("filedisc: empty directory")
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 5 * time.Second
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = 200 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("filedisc: discovery dir %q: %w", cfg.Dir, err)
	}
	host, _ := os.Hostname()
	return &Registry{cfg: cfg, hostname: host, now: time.Now, seen: map[string]map[string]record{}}, nil
}

func (r *Registry) path(role, id string) string {
	return filepath.Join(r.cfg.Dir, role, id+".json")
}

// Register writes the record and renews its lease until ctx ends or the
// registration is deregistered.
func (r *Registry) Register(ctx context.Context, in discovery.Instance) (discovery.Registration, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	reg := &registration{r: r, rec: record{Instance: in.Clone(), PID: os.Getpid(), Host: r.hostname, Owner: rand.Text()}}
	if err := os.MkdirAll(filepath.Join(r.cfg.Dir, in.Role), 0o755); err != nil {
		return nil, fmt.Errorf("filedisc: %w", err)
	}
	if old, ok := readRecord(r.path(in.Role, in.ID)); ok && r.live(old, r.now()) {
		return nil, fmt.Errorf("%w: %q is registered by pid %d on %s until %s", discovery.ErrIDTaken, in.ID, old.PID, old.Host, old.Expires.Format(time.RFC3339))
	}
	if err := reg.write(true); err != nil {
		return nil, err
	}
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	reg.cancel = cancel
	go reg.renew(ctx, loopCtx)
	return reg, nil
}

// Instances lists the live, passing instances of role.
func (r *Registry) Instances(ctx context.Context, role string) ([]discovery.Instance, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dir := filepath.Join(r.cfg.Dir, role)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		// No role directory: nobody of the role has registered, or the
		// directory was removed under running services and the role's
		// renewals have not written it back yet (the records this
		// registry saw are kept, below). With the whole directory gone,
		// say the listing failed, so watchers keep their last list: a
		// registry that saw nothing yet cannot tell "none" from "gone".
		if _, err := os.Stat(r.cfg.Dir); err != nil {
			return nil, fmt.Errorf("filedisc: discovery directory: %w", err)
		}
		entries = nil
	} else if err != nil {
		return nil, fmt.Errorf("filedisc: %w", err)
	}
	now := r.now()
	onDisk := map[string]record{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		rec, ok := readRecord(filepath.Join(dir, e.Name()))
		if !ok || rec.Role != role { // garbage, or removed since ReadDir
			continue
		}
		if now.Sub(rec.Expires) > staleLeases*r.cfg.Lease {
			// Left by a process that died without deregistering (or a
			// tombstone), long enough ago that no renewal is coming:
			// remove it, so dead instances do not pile up for every
			// watcher to read.
			_ = os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		onDisk[rec.ID] = rec
	}
	return r.list(role, onDisk, now), nil
}

// list returns the listable instances of role from the records on disk
// and those this registry saw before that have vanished without a
// tombstone, and remembers the live ones for the next listing.
func (r *Registry) list(role string, onDisk map[string]record, now time.Time) []discovery.Instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := r.seen[role]
	next := map[string]record{}
	for id, rec := range seen {
		if _, ok := onDisk[id]; !ok && r.live(rec, now) {
			next[id] = rec // vanished: kept until its lease ends
		}
	}
	for id, rec := range onDisk {
		if !rec.Gone && r.live(rec, now) {
			next[id] = rec
		}
	}
	out := []discovery.Instance{}
	for _, rec := range next {
		if !rec.Critical {
			out = append(out, rec.Instance)
		}
	}
	if len(next) > 0 {
		r.seen[role] = next
	} else {
		delete(r.seen, role)
	}
	discovery.SortInstances(out)
	return out
}

// Watch polls the role's directory. A listing that fails keeps the last
// one in force and is logged (the first failure and every tenth).
func (r *Registry) Watch(ctx context.Context, role string) (<-chan []discovery.Instance, error) {
	failures := 0
	return discovery.PollWatch(ctx, r.cfg.PollInterval, func(ctx context.Context) ([]discovery.Instance, error) {
		ins, err := r.Instances(ctx, role)
		switch {
		case err != nil && ctx.Err() == nil:
			if failures++; backoff.LogWorthy(failures) {
				r.cfg.Logger.Warn("file discovery: listing failed; keeping the last list", "role", role, "failures", failures, "err", err)
			}
		case err == nil && failures > 0:
			r.cfg.Logger.Info("file discovery: listing works again", "role", role, "after_failures", failures)
			failures = 0
		}
		return ins, err
	}), nil
}

// forget drops the record of registration owner from what the listings
// remember, so a deregistered record that is missing from disk (no
// tombstone could be written) is not kept to its lease's end here.
func (r *Registry) forget(role, id, owner string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec, ok := r.seen[role][id]; ok && rec.Owner == owner {
		delete(r.seen[role], id)
	}
}

// live reports whether rec's lease runs at now and its process is alive.
func (r *Registry) live(rec record, now time.Time) bool {
	return now.Before(rec.Expires) && r.processAlive(rec)
}

func (r *Registry) processAlive(rec record) bool {
	if rec.Host != r.hostname || rec.PID <= 0 {
		return true // cannot check another host's processes; the lease decides
	}
	err := syscall.Kill(rec.PID, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

type registration struct {
	r      *Registry
	mu     sync.Mutex
	rec    record
	gone   bool
	cancel context.CancelFunc
}

// errTakenOver: another registration's record is in place of ours.
var errTakenOver = errors.New("filedisc: the record was taken over by another registration of this id")

// theirs reports whether the record on disk belongs to another
// registration (a missing or unreadable one is nobody's).
func (g *registration) theirs() bool {
	cur, ok := readRecord(g.r.path(g.rec.Role, g.rec.ID))
	return ok && cur.Owner != "" && cur.Owner != g.rec.Owner
}

// write writes the record; unless taking over (Register, which checked
// the holder is gone), it leaves another registration's record alone.
func (g *registration) write(takeOver bool) error {
	if !takeOver && g.theirs() {
		return errTakenOver
	}
	g.rec.Expires = g.r.now().Add(g.r.cfg.Lease)
	b, err := json.Marshal(g.rec)
	if err != nil {
		return fmt.Errorf("filedisc: %w", err)
	}
	p := g.r.path(g.rec.Role, g.rec.ID)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("filedisc: %w", err)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", p, os.Getpid())
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("filedisc: write %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("filedisc: %w", err)
	}
	return nil
}

// renew rewrites the record every third of a lease, which also restores it
// if someone deleted it. It stops on Deregister or when the owner's ctx ends,
// removing the record in the latter case too.
func (g *registration) renew(ownerCtx, loopCtx context.Context) {
	t := time.NewTicker(g.r.cfg.Lease / 3)
	defer t.Stop()
	failures := 0
	for {
		select {
		case <-loopCtx.Done():
			return
		case <-ownerCtx.Done():
			_ = g.Deregister(context.Background())
			return
		case <-t.C:
		}
		g.mu.Lock()
		var err error
		if !g.gone {
			err = g.write(false)
			if errors.Is(err, errTakenOver) {
				g.gone = true // another process holds the id now: stop, leave its record
			}
		}
		g.mu.Unlock()
		if errors.Is(err, errTakenOver) {
			g.r.cfg.Logger.Error("discovery: another instance registered this id after our lease ran out; no longer registered", "id", g.rec.ID)
			return
		}
		if err != nil {
			failures++
			if backoff.LogWorthy(failures) {
				g.r.cfg.Logger.Warn("discovery lease renewal failed", "id", g.rec.ID, "failures", failures, "err", err)
			}
		} else {
			failures = 0
		}
	}
}

func (g *registration) SetHealth(_ context.Context, h discovery.Health) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return discovery.ErrNotFound
	}
	g.rec.Critical = h == discovery.Critical
	return g.write(false)
}

func (g *registration) SetMeta(_ context.Context, meta map[string]string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gone {
		return discovery.ErrNotFound
	}
	g.rec.Meta = maps.Clone(meta)
	return g.write(false)
}

func (g *registration) Deregister(context.Context) error {
	g.mu.Lock()
	if g.gone {
		g.mu.Unlock()
		return nil
	}
	g.gone = true
	g.mu.Unlock()
	g.cancel()
	if g.theirs() { // not ours to remove
		return nil
	}
	// A tombstone, not a removal: listings that saw the record drop it at
	// once (a record that merely vanished is kept to its lease's end).
	// Its lease ends now, so the id is free for a new registration, and
	// listings remove it staleLeases leases later. It is written over the
	// record in place, never creating a file: a record already gone needs
	// none, and a directory being removed (a test's cleanup, an operator)
	// must not find a file appear in it. A reader that catches the file
	// half-written skips it once, as a vanished record, until it reads the
	// tombstone.
	g.mu.Lock()
	defer g.mu.Unlock()
	// This registry's own listings drop the record at once whether or
	// not a tombstone can be written: they need not wait for one.
	g.r.forget(g.rec.Role, g.rec.ID, g.rec.Owner)
	g.rec.Gone = true
	g.rec.Expires = g.r.now()
	b, err := json.Marshal(g.rec)
	if err != nil {
		return fmt.Errorf("filedisc: %w", err)
	}
	f, err := os.OpenFile(g.r.path(g.rec.Role, g.rec.ID), os.O_WRONLY|os.O_TRUNC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("filedisc: deregister %s: %w", g.rec.ID, err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("filedisc: deregister %s: %w", g.rec.ID, err)
	}
	return nil
}
