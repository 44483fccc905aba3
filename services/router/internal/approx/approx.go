// Package approx approximates the KV cache of workers that publish no KV
// events: the router assumes a worker caches the prompt blocks it routed
// there, for a TTL, and at most a fixed number of blocks per worker (the
// oldest go first, as in an LRU cache). Pure logic; callers pass the time
// and apply the returned changes to the index.
package approx

import (
	"container/list"
	"time"
)

type item struct {
	hash    uint64
	expires time.Time
}

type workerCache struct {
	order *list.List // of item, oldest (soonest to expire) first
	byKey map[uint64]*list.Element
}

// Tracker is not safe for concurrent use; the router guards it.
type Tracker struct {
	ttl     time.Duration
	cap     int
	workers map[string]*workerCache
}

// New returns a tracker keeping blocks for ttl, at most maxBlocks a worker.
func New(ttl time.Duration, maxBlocks int) *Tracker {
	return &Tracker{ttl: ttl, cap: max(maxBlocks, 1), workers: map[string]*workerCache{}}
}

// Insert records that worker now caches hashes (a request's chained prompt
// blocks) as of now. It returns the hashes to store (at most the cap, the
// prefix first) and the hashes evicted to stay under the cap.
func (t *Tracker) Insert(worker string, hashes []uint64, now time.Time) (stored, evicted []uint64) {
	c := t.workers[worker]
	if c == nil {
		c = &workerCache{order: list.New(), byKey: map[uint64]*list.Element{}}
		t.workers[worker] = c
	}
	stored = hashes[:min(len(hashes), t.cap)]
	exp := now.Add(t.ttl)
	for _, h := range stored {
		if e, ok := c.byKey[h]; ok {
			e.Value = item{h, exp}
			c.order.MoveToBack(e)
			continue
		}
		c.byKey[h] = c.order.PushBack(item{h, exp})
	}
	for c.order.Len() > t.cap {
		evicted = append(evicted, t.pop(c))
	}
	return stored, evicted
}

// Expire removes the blocks whose TTL passed and returns them per worker.
func (t *Tracker) Expire(now time.Time) map[string][]uint64 {
	var out map[string][]uint64
	for w, c := range t.workers {
		for c.order.Len() > 0 && !now.Before(c.order.Front().Value.(item).expires) {
			if out == nil {
				out = map[string][]uint64{}
			}
			out[w] = append(out[w], t.pop(c))
		}
		if c.order.Len() == 0 {
			delete(t.workers, w)
		}
	}
	return out
}

// Forget drops a worker.
func (t *Tracker) Forget(worker string) { delete(t.workers, worker) }

// Len returns the blocks held for worker.
func (t *Tracker) Len(worker string) int {
	if c := t.workers[worker]; c != nil {
		return c.order.Len()
	}
	return 0
}

func (t *Tracker) pop(c *workerCache) uint64 {
	it := c.order.Remove(c.order.Front()).(item)
	delete(c.byKey, it.hash)
	return it.hash
}
