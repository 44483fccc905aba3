// Package catalog is the kvbm-controller's catalog of the shared
// object-store tier (G4): every block object in the bucket, its size and
// its last use, kept from the store's own listing and from what workers
// report they wrote and read.
//
// The catalog exists so that the shared tier is one thing to the rest of
// the system rather than N partial views. The router follows one event
// stream per model and block size (tier External) and indexes the store
// as a single holder every worker of the model can load from; and one
// owner, not every worker, decides what leaves the store: the least
// recently used objects once the store holds more than its byte budget,
// and any object unused for longer than its time to live.
//
// The store is the truth. A listing at start-up builds the catalog (an
// object's last use is then its write time), and a listing every
// Reconcile period adds objects no report announced and forgets those
// gone from the store, so a lost report, a controller restart or an
// object deleted by hand is repaired within one period. An object is
// withdrawn (Removed) before it is deleted: a worker that still loads it
// meanwhile finds it gone, and recomputes; it never reads another block
// under its key, since keys are content hashes and objects are checked.
package catalog

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvbm/s3tier"
	"switchyard.dev/libs/kvtier"
)

// Store is the object store as the catalog uses it.
type Store interface {
	// List calls fn for every object whose key starts with prefix.
	List(ctx context.Context, prefix string, fn func(key string, size int64, modified time.Time)) error
	// Delete removes an object; deleting a missing one is not an error.
	Delete(ctx context.Context, key string) error
}

// Config configures a Catalog.
type Config struct {
	Store Store
	// CapacityBytes is the store's budget: past it the least recently
	// used objects are deleted (0: no budget).
	CapacityBytes int64
	// TTL deletes objects unused for longer (0: none).
	TTL time.Duration
	// Reconcile is how often the store is listed (default 1m).
	Reconcile time.Duration
	// Journal is how many batches each stream keeps for subscribers
	// resuming after a break (default 4096).
	Journal int
	Logger  *slog.Logger
	Now     func() time.Time // default time.Now
}

// Stream names one event stream: a model's namespace and block size.
// Every block geometry (bytes a block) of them is in it.
type Stream struct {
	Namespace string
	BlockSize int
}

// Catalog is the shared tier's catalog. Its methods are safe for
// concurrent use.
type Catalog struct {
	cfg Config

	mu      sync.Mutex
	entries map[s3tier.Key]*entry
	lru     *list.List // of *entry, front the most recently used
	used    int64
	streams map[Stream]*stream
	pools   map[poolKey]*Pool
	gen     uint64 // listing generation
	// unsorted: a listing added objects at their write times, out of the
	// LRU's order (by last use, the most recent first), which eviction
	// and the TTL rely on.
	unsorted bool
	kick     chan struct{} // a report took the store past its budget
	// standby: another controller owns the store's eviction (SetStandby).
	standby bool
	stats   Stats
}

type entry struct {
	key     s3tier.Key
	bytes   int64
	lastUse time.Time
	added   time.Time // first seen
	seen    uint64    // last listing generation that found it
	elem    *list.Element
}

// stream is one Stream's journal and the blocks it holds: a hash is
// Stored when its first geometry arrives and Removed with its last.
type stream struct {
	j    *kvevent.Journal
	refs map[uint64]int
}

type poolKey struct {
	ns     string
	bs, bb int
}

// Pool is one namespace and geometry of the store: what it holds and how
// fast workers moved its blocks.
type Pool struct {
	Namespace             string
	BlockSize, BlockBytes int
	Blocks                int64
	Bytes                 int64
	// Rates, bytes a second, as workers measured them (0: no report yet).
	WriteBytesPerSecond, ReadBytesPerSecond float64
	// Totals of what workers reported moving, and the time it took: the
	// exported counters, from which Prometheus derives the bandwidth over
	// any window.
	WriteBytes, ReadBytes int64
	WriteTime, ReadTime   time.Duration
	// BlockLoadNanos is the mean time to read one block (0: unmeasured).
	BlockLoadNanos float64
}

// Stats counts the catalog's work.
type Stats struct {
	Objects, Bytes  int64
	Evicted         int64 // objects deleted from the store for the budget or the TTL
	DeleteFailures  int64
	Listings        int64
	ListingFailures int64
}

// New returns an empty catalog; Run (or Reconcile) fills it from the
// store.
func New(cfg Config) *Catalog {
	if cfg.Reconcile <= 0 {
		cfg.Reconcile = time.Minute
	}
	if cfg.Journal <= 0 {
		cfg.Journal = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Catalog{cfg: cfg, entries: map[s3tier.Key]*entry{}, lru: list.New(),
		streams: map[Stream]*stream{}, pools: map[poolKey]*Pool{}, kick: make(chan struct{}, 1)}
}

// Run reconciles with the store every Reconcile period, and applies the
// budget when a report took the store past it and the TTL, until ctx
// ends. The first listing has been done by the caller (Reconcile) so
// that a store that cannot be listed fails start-up.
func (c *Catalog) Run(ctx context.Context) {
	tick := time.NewTicker(c.cfg.Reconcile)
	defer tick.Stop()
	// The TTL is checked more often than the store is listed: an expired
	// object need not wait for the next listing.
	var expire <-chan time.Time
	if c.cfg.TTL > 0 {
		ttl := time.NewTicker(max(min(c.cfg.Reconcile, c.cfg.TTL/4), time.Second))
		defer ttl.Stop()
		expire = ttl.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if err := c.Reconcile(ctx); err != nil && ctx.Err() == nil {
				c.cfg.Logger.Warn("kvbm catalog: listing the store failed; retrying at the next period", "err", err, "in", c.cfg.Reconcile)
			}
		case <-expire:
			c.evict(ctx)
		case <-c.kick:
			c.evict(ctx)
		}
	}
}

// Reconcile lists the store: objects the catalog lacks are added (last
// used when written), and objects it holds that the listing did not find
// and that were known before it began are forgotten. Then the budget and
// the TTL are applied.
func (c *Catalog) Reconcile(ctx context.Context) error {
	c.mu.Lock()
	c.gen++
	gen, start := c.gen, c.cfg.Now()
	c.mu.Unlock()
	batch := newBatch()
	var found []*entry
	err := c.cfg.Store.List(ctx, s3tier.Root, func(key string, size int64, modified time.Time) {
		k, err := s3tier.ParseKey(key)
		if err != nil {
			return // not a block: another application's object
		}
		found = append(found, &entry{key: k, bytes: size, lastUse: modified})
		if len(found) == 1024 {
			c.learn(found, gen, batch)
			found = found[:0]
		}
	})
	c.learn(found, gen, batch)
	c.mu.Lock()
	c.stats.Listings++
	if err != nil {
		c.stats.ListingFailures++
		c.flushLocked(batch)
		c.mu.Unlock()
		return fmt.Errorf("kvbm catalog: listing %q: %w", s3tier.Root, err)
	}
	for k, e := range c.entries {
		if e.seen < gen && e.added.Before(start) {
			c.removeLocked(k, batch)
		}
	}
	c.flushLocked(batch)
	if c.unsorted {
		c.sortLocked()
	}
	objects := len(c.entries)
	c.mu.Unlock()
	c.cfg.Logger.Debug("kvbm catalog: store listed", "objects", objects, "took", c.cfg.Now().Sub(start))
	c.evict(ctx)
	return nil
}

// learn applies one page of a listing.
func (c *Catalog) learn(found []*entry, gen uint64, b *batch) {
	if len(found) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	for _, f := range found {
		if e, ok := c.entries[f.key]; ok {
			e.seen = gen
			continue
		}
		f.seen, f.added = gen, now
		c.addLocked(f, b)
		c.unsorted = true
	}
	c.flushLocked(b)
}

// Report is one worker's news about one namespace and geometry.
type Report struct {
	Namespace             string
	BlockSize, BlockBytes int
	// Written blocks with their object sizes (also those the store had
	// already: a block's object has one size).
	Written []Written
	Read    []uint64 // loaded: used now
	Gone    []uint64 // missing or corrupt in the store
	// Transfers since the last report.
	WriteBytes, ReadBytes int64
	WriteTime, ReadTime   time.Duration
}

// Written is a block a worker stored.
type Written struct {
	Hash  uint64
	Bytes int64
}

// ErrBadReport is returned for a report the catalog cannot take.
var ErrBadReport = errors.New("kvbm catalog: bad report")

// Apply takes a worker's report. The budget is applied after, by Run:
// a report does not wait for the store's deletes.
func (c *Catalog) Apply(r Report) error {
	base := s3tier.Key{Namespace: r.Namespace, BlockSize: r.BlockSize, BlockBytes: r.BlockBytes}
	if _, err := s3tier.ParseKey(base.String()); err != nil {
		return fmt.Errorf("%w: namespace %q, block size %d, block bytes %d", ErrBadReport, r.Namespace, r.BlockSize, r.BlockBytes)
	}
	if r.WriteBytes < 0 || r.ReadBytes < 0 || r.WriteTime < 0 || r.ReadTime < 0 {
		return fmt.Errorf("%w: negative transfer totals", ErrBadReport)
	}
	b := newBatch()
	c.mu.Lock()
	now := c.cfg.Now()
	for _, w := range r.Written {
		k := base
		k.Hash = w.Hash
		if e, ok := c.entries[k]; ok {
			c.touchLocked(e, now)
			continue
		}
		c.addLocked(&entry{key: k, bytes: max(w.Bytes, 0), lastUse: now, added: now, seen: c.gen}, b)
	}
	for _, h := range r.Read {
		k := base
		k.Hash = h
		if e, ok := c.entries[k]; ok {
			c.touchLocked(e, now)
		}
	}
	for _, h := range r.Gone {
		k := base
		k.Hash = h
		c.removeLocked(k, b)
	}
	p := c.poolLocked(poolKey{r.Namespace, r.BlockSize, r.BlockBytes})
	reads := len(r.Read)
	p.WriteBytesPerSecond = rate(p.WriteBytesPerSecond, r.WriteBytes, r.WriteTime)
	p.ReadBytesPerSecond = rate(p.ReadBytesPerSecond, r.ReadBytes, r.ReadTime)
	p.WriteBytes += max(r.WriteBytes, 0)
	p.ReadBytes += max(r.ReadBytes, 0)
	p.WriteTime += max(r.WriteTime, 0)
	p.ReadTime += max(r.ReadTime, 0)
	if reads > 0 && r.ReadTime > 0 {
		p.BlockLoadNanos = ewma(p.BlockLoadNanos, float64(r.ReadTime.Nanoseconds())/float64(reads))
	}
	c.flushLocked(b)
	over := c.cfg.CapacityBytes > 0 && c.used > c.cfg.CapacityBytes
	c.mu.Unlock()
	if over {
		select {
		case c.kick <- struct{}{}:
		default: // an eviction is due already
		}
	}
	return nil
}

// rate folds a report's bytes over its time into an average rate.
func rate(avg float64, n int64, d time.Duration) float64 {
	if n <= 0 || d <= 0 {
		return avg
	}
	return ewma(avg, float64(n)/d.Seconds())
}

func ewma(avg, x float64) float64 {
	if avg == 0 {
		return x
	}
	return 0.8*avg + 0.2*x
}

func (c *Catalog) poolLocked(k poolKey) *Pool {
	p := c.pools[k]
	if p == nil {
		p = &Pool{Namespace: k.ns, BlockSize: k.bs, BlockBytes: k.bb}
		c.pools[k] = p
	}
	return p
}

func (c *Catalog) addLocked(e *entry, b *batch) {
	c.entries[e.key] = e
	e.elem = c.lru.PushFront(e)
	c.used += e.bytes
	p := c.poolLocked(poolKey{e.key.Namespace, e.key.BlockSize, e.key.BlockBytes})
	p.Blocks++
	p.Bytes += e.bytes
	s := c.streamLocked(Stream{e.key.Namespace, e.key.BlockSize})
	if s.refs[e.key.Hash]++; s.refs[e.key.Hash] == 1 {
		b.add(s, kvevent.Stored, e.key.Hash)
	}
}

func (c *Catalog) removeLocked(k s3tier.Key, b *batch) *entry {
	e, ok := c.entries[k]
	if !ok {
		return nil
	}
	delete(c.entries, k)
	c.lru.Remove(e.elem)
	c.used -= e.bytes
	p := c.poolLocked(poolKey{k.Namespace, k.BlockSize, k.BlockBytes})
	p.Blocks--
	p.Bytes -= e.bytes
	s := c.streamLocked(Stream{k.Namespace, k.BlockSize})
	if s.refs[k.Hash]--; s.refs[k.Hash] <= 0 {
		delete(s.refs, k.Hash)
		b.add(s, kvevent.Removed, k.Hash)
	}
	return e
}

// sortLocked restores the LRU's order by last use, so a catalog rebuilt
// from a listing evicts its oldest objects first.
func (c *Catalog) sortLocked() {
	es := make([]*entry, 0, c.lru.Len())
	for el := c.lru.Front(); el != nil; el = el.Next() {
		es = append(es, el.Value.(*entry))
	}
	slices.SortStableFunc(es, func(a, b *entry) int { return b.lastUse.Compare(a.lastUse) })
	c.lru.Init()
	for _, e := range es {
		e.elem = c.lru.PushBack(e)
	}
	c.unsorted = false
}

func (c *Catalog) touchLocked(e *entry, now time.Time) {
	if now.After(e.lastUse) {
		e.lastUse = now
	}
	c.lru.MoveToFront(e.elem)
}

func (c *Catalog) streamLocked(k Stream) *stream {
	s := c.streams[k]
	if s == nil {
		s = &stream{j: kvevent.NewJournalAfter(c.cfg.Journal, kvevent.RandomStart()), refs: map[uint64]int{}}
		c.streams[k] = s
	}
	return s
}

// evict withdraws the objects past the budget and the expired ones, then
// deletes them from the store.
func (c *Catalog) evict(ctx context.Context) {
	b := newBatch()
	var victims []s3tier.Key
	c.mu.Lock()
	if c.standby {
		c.mu.Unlock()
		return
	}
	expired := time.Time{}
	if c.cfg.TTL > 0 {
		expired = c.cfg.Now().Add(-c.cfg.TTL)
	}
	for back := c.lru.Back(); back != nil; back = c.lru.Back() {
		e := back.Value.(*entry)
		over := c.cfg.CapacityBytes > 0 && c.used > c.cfg.CapacityBytes
		if !over && !e.lastUse.Before(expired) {
			break
		}
		c.removeLocked(e.key, b)
		victims = append(victims, e.key)
	}
	c.flushLocked(b)
	c.mu.Unlock()
	for _, k := range victims {
		err := c.cfg.Store.Delete(ctx, k.String())
		c.mu.Lock()
		if err == nil {
			c.stats.Evicted++
		} else {
			// Withdrawn but still stored: the next listing finds it
			// again and the budget deletes it then.
			c.stats.DeleteFailures++
		}
		c.mu.Unlock()
		if err != nil {
			c.cfg.Logger.Warn("kvbm catalog: deleting an evicted object failed", "key", k.String(), "err", err)
		}
	}
}

// batch gathers one operation's events per stream, appended as one
// journal batch each.
type batch struct {
	order []*stream
	evs   map[*stream][]kvevent.Event
}

func newBatch() *batch { return &batch{evs: map[*stream][]kvevent.Event{}} }

func (b *batch) add(s *stream, kind kvevent.Kind, hash uint64) {
	evs, ok := b.evs[s]
	if !ok {
		b.order = append(b.order, s)
	}
	if n := len(evs); n > 0 && evs[n-1].Kind == kind {
		evs[n-1].BlockHashes = append(evs[n-1].BlockHashes, hash)
	} else {
		evs = append(evs, kvevent.Event{Kind: kind, BlockHashes: []uint64{hash}, Tier: kvtier.External})
	}
	b.evs[s] = evs
}

// flushLocked appends b's events and empties b; c.mu held, so a dump and
// the journal agree.
func (c *Catalog) flushLocked(b *batch) {
	for _, s := range b.order {
		s.j.Append(b.evs[s])
	}
	b.order = b.order[:0]
	clear(b.evs)
}

// Dump returns the blocks of stream k and the sequence they reflect: a
// subscriber that applies them and then the journal's batches after seq
// holds the stream's state.
func (c *Catalog) Dump(k Stream) (hashes []uint64, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streamLocked(k)
	hashes = make([]uint64, 0, len(s.refs))
	for h := range s.refs {
		hashes = append(hashes, h)
	}
	slices.Sort(hashes)
	return hashes, s.j.Last()
}

// Subscribe follows stream k after sequence after; Last is its newest.
func (c *Catalog) Subscribe(k Stream, after uint64) (sub *kvevent.Subscription, last uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streamLocked(k)
	return s.j.Subscribe(after), s.j.Last()
}

// Pools lists every namespace and geometry the store holds or workers
// reported, sorted.
func (c *Catalog) Pools() []Pool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Pool, 0, len(c.pools))
	for _, p := range c.pools {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b Pool) int {
		if a.Namespace != b.Namespace {
			if a.Namespace < b.Namespace {
				return -1
			}
			return 1
		}
		if a.BlockSize != b.BlockSize {
			return a.BlockSize - b.BlockSize
		}
		return a.BlockBytes - b.BlockBytes
	})
	return out
}

// SetStandby makes the catalog stop (true) or resume (false) deleting
// from the store. Only the controller that routers follow and workers
// report to sees the store's use: another one, given the same bucket,
// lists it but must not evict by write times alone.
func (c *Catalog) SetStandby(standby bool) {
	c.mu.Lock()
	c.standby = standby
	c.mu.Unlock()
	if !standby {
		select {
		case c.kick <- struct{}{}: // apply what was deferred
		default:
		}
	}
}

// Stats returns the catalog's counters.
func (c *Catalog) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats
	st.Objects, st.Bytes = int64(len(c.entries)), c.used
	return st
}

// Capacity is the budget in bytes (0: none).
func (c *Catalog) Capacity() int64 { return c.cfg.CapacityBytes }
