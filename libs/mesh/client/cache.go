package client

import (
	"sync"

	"connectrpc.com/connect"
)

// Cache holds one Connect client of type T per peer base URL, built on
// first use by newClient (a generated New...ServiceClient) over one shared
// HTTP client, so every call to a peer multiplexes over that peer's few
// HTTP/2 connections. Entries are never dropped: a Connect client owns no
// connection (the HTTP client's idle timeout closes those) and peers are
// few. Safe for concurrent use.
type Cache[T any] struct {
	hc        connect.HTTPClient
	newClient func(connect.HTTPClient, string, ...connect.ClientOption) T
	opts      []connect.ClientOption

	mu      sync.Mutex
	clients map[string]T
}

// NewCache returns an empty cache whose clients are newClient(hc, url,
// opts...).
func NewCache[T any](hc connect.HTTPClient, newClient func(connect.HTTPClient, string, ...connect.ClientOption) T, opts ...connect.ClientOption) *Cache[T] {
	return &Cache[T]{hc: hc, newClient: newClient, opts: opts, clients: make(map[string]T)}
}

// Get returns the client of the peer at baseURL (http://host:port), built
// on the first call for that URL.
func (c *Cache[T]) Get(baseURL string) T {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, ok := c.clients[baseURL]
	if !ok {
		cl = c.newClient(c.hc, baseURL, c.opts...)
		c.clients[baseURL] = cl
	}
	return cl
}
