package app

import (
	"testing"

	"switchyard.dev/libs/mesh/meshtest"
)

// A plain grpc-go client (go-grpc-middleware interceptors) can call the
// service: health, reflection and InfoService.
func TestGRPCConformance(t *testing.T) {
	t.Parallel()
	r := meshtest.Start(t, Spec("v0.0.0-test", nil), "-listen", "127.0.0.1:0", "-discovery", "none", "-router-url", "http://127.0.0.1:1")
	meshtest.CheckGRPC(t, r.Addr, "frontend")
}
