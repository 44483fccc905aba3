package constrain

import (
	"bytes"
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"sync"
)

// Cache compiles each schema once: requests that repeat a response_format
// or a tool list share its Grammar. Entries are keyed by the SHA-256 of the
// schema's compact form (so whitespace does not matter) and evicted least
// recently used; failed compilations are cached too, since the same schema
// fails the same way. Safe for concurrent use: concurrent requests for one
// schema wait for a single compilation.
type Cache struct {
	mu    sync.Mutex
	n     int
	lru   *list.List // of *cacheEntry, most recent first
	index map[[sha256.Size]byte]*list.Element
}

type cacheEntry struct {
	key  [sha256.Size]byte
	once sync.Once
	g    *Grammar
	err  error
}

// NewCache returns a cache of at most n grammars (at least 1).
func NewCache(n int) *Cache {
	return &Cache{n: max(n, 1), lru: list.New(), index: map[[sha256.Size]byte]*list.Element{}}
}

// Schema returns the grammar of schema, compiling it on first use.
func (c *Cache) Schema(schema []byte) (*Grammar, error) {
	key := schemaKey(schema)
	c.mu.Lock()
	el, ok := c.index[key]
	if ok {
		c.lru.MoveToFront(el)
	} else {
		el = c.lru.PushFront(&cacheEntry{key: key})
		c.index[key] = el
		for c.lru.Len() > c.n {
			old := c.lru.Back()
			c.lru.Remove(old)
			delete(c.index, old.Value.(*cacheEntry).key)
		}
	}
	e := el.Value.(*cacheEntry)
	c.mu.Unlock()
	e.once.Do(func() { e.g, e.err = CompileSchema(schema) })
	return e.g, e.err
}

// Len is the number of cached schemas.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

func schemaKey(schema []byte) [sha256.Size]byte {
	if len(schema) <= MaxSchemaBytes {
		var b bytes.Buffer
		if json.Compact(&b, schema) == nil {
			return sha256.Sum256(b.Bytes())
		}
	}
	return sha256.Sum256(schema)
}
