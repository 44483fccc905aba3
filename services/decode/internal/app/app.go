// Package app wires the decode service: a worker (libs/worker) registered with
// role decode. Without a prefill pool (or below -disagg-threshold-tokens) a
// decode worker prefills its own prompts: aggregated serving.
package app

import (
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/libs/worker"
)

// DefaultListen is where the decode service listens unless -listen says
// otherwise.
const DefaultListen = "127.0.0.1:9200"

// Spec describes the decode service.
func Spec(version string) service.Spec {
	return worker.Spec(discovery.RoleDecode, version, DefaultListen)
}
