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

	"connectrpc.com/connect"

	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/mesh/client"
)

// NewHTTPClient returns the h2c client every upstream call uses.
func NewHTTPClient() *http.Client { return client.NewHTTP() }

// Workers caches one WorkerService client per base URL.
type Workers struct {
	cache *client.Cache[workerv1connect.WorkerServiceClient]
}

// NewWorkers returns a pool over hc.
func NewWorkers(hc connect.HTTPClient, opts ...connect.ClientOption) *Workers {
	return &Workers{cache: client.NewCache(hc, workerv1connect.NewWorkerServiceClient, opts...)}
}

// Worker returns the client of the worker at baseURL (http://host:port).
func (w *Workers) Worker(baseURL string) workerv1connect.WorkerServiceClient {
	return w.cache.Get(baseURL)
}
