// Package app wires the prefill service: a worker (libs/worker) registered with
// role prefill.
package app

import (
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/libs/worker"
)

// DefaultListen is where the prefill service listens unless -listen says
// otherwise.
const DefaultListen = "127.0.0.1:9100"

// Spec describes the prefill service.
func Spec(version string) service.Spec {
	return worker.Spec(discovery.RolePrefill, version, DefaultListen)
}
