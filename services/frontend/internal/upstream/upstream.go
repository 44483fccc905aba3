// Package upstream holds the frontend's Connect clients: router replicas
// with failover, and one pooled client per worker.
//
// All clients share one h2c http.Client, so requests to a worker multiplex
// over a few HTTP/2 connections instead of opening one per request, and
// dead connections are noticed by HTTP/2 pings rather than at the next
// request.
package upstream

import (
	"net/http"
	"sync"

	"connectrpc.com/connect"

	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/mesh/client"
)

// NewHTTPClient returns the h2c client every upstream call uses.
func NewHTTPClient() *http.Client { return client.NewHTTP() }

// Workers caches one WorkerService client per base URL.
type Workers struct {
	hc   connect.HTTPClient
	opts []connect.ClientOption

	mu      sync.Mutex
	clients map[string]workerv1connect.WorkerServiceClient
}

// NewWorkers returns a pool over hc.
func NewWorkers(hc connect.HTTPClient, opts ...connect.ClientOption) *Workers {
	return &Workers{hc: hc, opts: opts, clients: make(map[string]workerv1connect.WorkerServiceClient)}
}

// Worker returns the client of the worker at baseURL (http://host:port).
func (w *Workers) Worker(baseURL string) workerv1connect.WorkerServiceClient {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.clients[baseURL]
	if !ok {
		c = workerv1connect.NewWorkerServiceClient(w.hc, baseURL, w.opts...)
		w.clients[baseURL] = c
	}
	return c
}
