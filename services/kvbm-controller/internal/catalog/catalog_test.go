package catalog

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvbm/s3tier"
)

// memStore is the catalog's collaborator in memory: a bucket of object
// sizes and write times.
type memStore struct {
	mu      sync.Mutex
	objs    map[string]memObj
	deletes []string
	failDel bool
}

type memObj struct {
	size int64
	mod  time.Time
}

func newMemStore() *memStore { return &memStore{objs: map[string]memObj{}} }

func (m *memStore) put(k s3tier.Key, size int64, mod time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[k.String()] = memObj{size, mod}
}

func (m *memStore) List(_ context.Context, prefix string, fn func(string, int64, time.Time)) error {
	m.mu.Lock()
	keys := slices.Sorted(maps.Keys(m.objs))
	objs := maps.Clone(m.objs)
	m.mu.Unlock()
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			fn(k, objs[k].size, objs[k].mod)
		}
	}
	return nil
}

func (m *memStore) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deletes = append(m.deletes, key)
	if m.failDel {
		return context.DeadlineExceeded
	}
	delete(m.objs, key)
	return nil
}

func (m *memStore) has(k s3tier.Key) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.objs[k.String()]
	return ok
}

// clock is a settable time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func key(ns string, h uint64) s3tier.Key {
	return s3tier.Key{Namespace: ns, BlockSize: 16, BlockBytes: 100, Hash: h}
}
func written(hs ...uint64) (out []Written) {
	for _, h := range hs {
		out = append(out, Written{Hash: h, Bytes: 100})
	}
	return out
}

// follower applies a stream's dump and batches the way the router does,
// so tests compare what a subscriber holds with the catalog.
type follower struct {
	held map[uint64]bool
	seq  uint64
	sub  *kvevent.Subscription
}

func follow(t *testing.T, c *Catalog, k Stream) *follower {
	t.Helper()
	hashes, seq := c.Dump(k)
	f := &follower{held: map[uint64]bool{}, seq: seq}
	for _, h := range hashes {
		f.held[h] = true
	}
	f.sub, _ = c.Subscribe(k, seq)
	return f
}

// catchUp applies every batch up to the stream's newest.
func (f *follower) catchUp(t *testing.T, c *Catalog, k Stream) {
	t.Helper()
	_, last := c.Subscribe(k, 0)
	for f.seq < last {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		b, err := f.sub.Next(ctx)
		cancel()
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		if b.Seq != f.seq+1 {
			t.Fatalf("batch %d after %d", b.Seq, f.seq)
		}
		f.seq = b.Seq
		for _, e := range b.Events {
			for _, h := range e.BlockHashes {
				switch e.Kind {
				case kvevent.Stored:
					if f.held[h] {
						t.Fatalf("block %#x stored twice", h)
					}
					f.held[h] = true
				case kvevent.Removed:
					if !f.held[h] {
						t.Fatalf("block %#x removed but not held", h)
					}
					delete(f.held, h)
				}
			}
		}
	}
}

func (f *follower) check(t *testing.T, c *Catalog, k Stream) {
	t.Helper()
	f.catchUp(t, c, k)
	want, _ := c.Dump(k)
	got := slices.Sorted(maps.Keys(f.held))
	if !slices.Equal(got, want) {
		t.Fatalf("subscriber holds %x; catalog %x", got, want)
	}
}

func TestBudgetEvictsLeastRecentlyUsed(t *testing.T) {
	t.Parallel()
	st, clk := newMemStore(), &clock{t: time.Unix(1e9, 0)}
	c := New(Config{Store: st, CapacityBytes: 300, Now: clk.now})
	k := Stream{"m", 16}
	f := follow(t, c, k)
	for _, h := range []uint64{1, 2, 3} {
		st.put(key("m", h), 100, clk.t)
		clk.advance(time.Second)
		if err := c.Apply(Report{Namespace: "m", BlockSize: 16, BlockBytes: 100, Written: written(h)}); err != nil {
			t.Fatal(err)
		}
	}
	// Block 1 is read: 2 is now the least recently used.
	clk.advance(time.Second)
	if err := c.Apply(Report{Namespace: "m", BlockSize: 16, BlockBytes: 100, Read: []uint64{1}}); err != nil {
		t.Fatal(err)
	}
	st.put(key("m", 4), 100, clk.t)
	if err := c.Apply(Report{Namespace: "m", BlockSize: 16, BlockBytes: 100, Written: written(4)}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.kick: // Run evicts on this
	default:
		t.Fatal("a report past the budget did not ask for an eviction")
	}
	c.evict(t.Context())
	if st.has(key("m", 2)) || !st.has(key("m", 1)) || !st.has(key("m", 3)) || !st.has(key("m", 4)) {
		t.Fatalf("store after eviction: %v; want 1, 3, 4", st.objs)
	}
	if s := c.Stats(); s.Objects != 3 || s.Bytes != 300 || s.Evicted != 1 {
		t.Fatalf("stats %+v", s)
	}
	f.check(t, c, k)
	if f.held[2] || !f.held[1] {
		t.Fatalf("subscriber holds %v", f.held)
	}
}

func TestTTL(t *testing.T) {
	t.Parallel()
	st, clk := newMemStore(), &clock{t: time.Unix(1e9, 0)}
	c := New(Config{Store: st, TTL: time.Hour, Now: clk.now})
	k := Stream{"m", 16}
	f := follow(t, c, k)
	for _, h := range []uint64{1, 2} {
		st.put(key("m", h), 100, clk.t)
	}
	if err := c.Apply(Report{Namespace: "m", BlockSize: 16, BlockBytes: 100, Written: written(1, 2)}); err != nil {
		t.Fatal(err)
	}
	clk.advance(50 * time.Minute)
	_ = c.Apply(Report{Namespace: "m", BlockSize: 16, BlockBytes: 100, Read: []uint64{2}})
	clk.advance(20 * time.Minute)
	c.evict(t.Context())
	if st.has(key("m", 1)) || !st.has(key("m", 2)) {
		t.Fatalf("after the TTL: %v; want only 2", st.objs)
	}
	f.check(t, c, k)
}

// A catalog rebuilt from a listing knows every block object, skips other
// objects, and evicts the oldest first.
func TestReconcileRebuildsAndRepairs(t *testing.T) {
	t.Parallel()
	st, clk := newMemStore(), &clock{t: time.Unix(1e9, 0)}
	base := clk.t
	for i, h := range []uint64{5, 1, 4, 2, 3} { // written in this order
		st.put(key("m", h), 100, base.Add(time.Duration(i)*time.Second))
	}
	st.mu.Lock()
	st.objs["switchyard-kv/v1/m/readme.txt"] = memObj{10, base}
	st.objs["other-app/file"] = memObj{10, base}
	st.mu.Unlock()
	c := New(Config{Store: st, Now: clk.now})
	k := Stream{"m", 16}
	if err := c.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	f := follow(t, c, k)
	if got, _ := c.Dump(k); !slices.Equal(got, []uint64{1, 2, 3, 4, 5}) {
		t.Fatalf("dump %v", got)
	}
	// A block deleted behind the catalog's back is forgotten, one written
	// without a report is learnt.
	st.mu.Lock()
	delete(st.objs, key("m", 4).String())
	st.mu.Unlock()
	clk.advance(10 * time.Second)
	st.put(key("m", 9), 100, clk.t)
	if err := c.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.check(t, c, k)
	if got, _ := c.Dump(k); !slices.Equal(got, []uint64{1, 2, 3, 5, 9}) {
		t.Fatalf("dump after repair %v", got)
	}
	// The budget now takes the oldest writes first: 5 then 1.
	c.cfg.CapacityBytes = 300
	c.evict(t.Context())
	if st.has(key("m", 5)) || st.has(key("m", 1)) || !st.has(key("m", 2)) || !st.has(key("m", 9)) {
		t.Fatalf("store %v", slices.Sorted(maps.Keys(st.objs)))
	}
	f.check(t, c, k)
}

// A block is in a stream while any geometry holds it; streams of other
// models and block sizes are apart.
func TestStreamsAndGeometries(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	c := New(Config{Store: st})
	k := Stream{"m", 16}
	f := follow(t, c, k)
	apply := func(r Report) {
		t.Helper()
		if err := c.Apply(r); err != nil {
			t.Fatal(err)
		}
	}
	apply(Report{Namespace: "m", BlockSize: 16, BlockBytes: 100, Written: written(1, 2)})
	apply(Report{Namespace: "m", BlockSize: 16, BlockBytes: 200, Written: written(2, 3)})
	apply(Report{Namespace: "m", BlockSize: 32, BlockBytes: 100, Written: written(7)})
	apply(Report{Namespace: "n", BlockSize: 16, BlockBytes: 100, Written: written(8)})
	f.check(t, c, k)
	apply(Report{Namespace: "m", BlockSize: 16, BlockBytes: 100, Gone: []uint64{2}})
	f.check(t, c, k)
	if !f.held[2] {
		t.Fatal("block 2 left the stream while another geometry holds it")
	}
	apply(Report{Namespace: "m", BlockSize: 16, BlockBytes: 200, Gone: []uint64{2}})
	f.check(t, c, k)
	if got := slices.Sorted(maps.Keys(f.held)); !slices.Equal(got, []uint64{1, 3}) {
		t.Fatalf("held %v", got)
	}
	pools := c.Pools()
	if len(pools) != 4 || pools[0] != (Pool{Namespace: "m", BlockSize: 16, BlockBytes: 100, Blocks: 1, Bytes: 100}) {
		t.Fatalf("pools %+v", pools)
	}
}

func TestBadReports(t *testing.T) {
	t.Parallel()
	c := New(Config{Store: newMemStore()})
	for _, r := range []Report{
		{Namespace: "", BlockSize: 16, BlockBytes: 100},
		{Namespace: "a/b", BlockSize: 16, BlockBytes: 100},
		{Namespace: "m", BlockSize: 0, BlockBytes: 100},
		{Namespace: "m", BlockSize: 16, BlockBytes: 0},
		{Namespace: "m", BlockSize: 16, BlockBytes: 100, ReadBytes: -1},
	} {
		if err := c.Apply(r); err == nil {
			t.Errorf("Apply(%+v) = nil; want an error", r)
		}
	}
}

// A delete that fails leaves the object withdrawn; the next listing finds
// it again and the budget deletes it then.
func TestDeleteFailureRetriedByListing(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	c := New(Config{Store: st, CapacityBytes: 100})
	for _, h := range []uint64{1, 2} {
		st.put(key("m", h), 100, time.Unix(int64(h), 0))
	}
	st.failDel = true
	if err := c.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.DeleteFailures != 1 || s.Objects != 1 {
		t.Fatalf("stats %+v", s)
	}
	st.failDel = false
	if err := c.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st.has(key("m", 1)) || !st.has(key("m", 2)) {
		t.Fatalf("store %v", st.objs)
	}
}

// Rates fold reports' bytes over their times.
func TestRates(t *testing.T) {
	t.Parallel()
	c := New(Config{Store: newMemStore()})
	_ = c.Apply(Report{Namespace: "m", BlockSize: 16, BlockBytes: 100, Written: written(1),
		WriteBytes: 1000, WriteTime: time.Second, Read: []uint64{1, 1}, ReadBytes: 4000, ReadTime: 2 * time.Millisecond})
	p := c.Pools()[0]
	if p.WriteBytesPerSecond != 1000 || p.ReadBytesPerSecond != 2e6 || p.BlockLoadNanos != 1e6 {
		t.Fatalf("pool %+v", p)
	}
}

// A standby catalog keeps listing and taking reports but deletes
// nothing; once it owns the store, what it deferred is applied.
func TestStandbyDoesNotEvict(t *testing.T) {
	t.Parallel()
	st := newMemStore()
	c := New(Config{Store: st, CapacityBytes: 100})
	c.SetStandby(true)
	for _, h := range []uint64{1, 2} {
		st.put(key("m", h), 100, time.Unix(int64(h), 0))
	}
	if err := c.Reconcile(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(st.deletes) != 0 || c.Stats().Objects != 2 {
		t.Fatalf("a standby deleted %v (catalog %+v)", st.deletes, c.Stats())
	}
	c.SetStandby(false)
	<-c.kick
	c.evict(t.Context())
	if st.has(key("m", 1)) || !st.has(key("m", 2)) {
		t.Fatalf("store %v; want the older block evicted", st.objs)
	}
}
