//go:build ucx && cgo

package ucx_test

import (
	"os"
	"strings"
	"testing"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/backend/ucx"
	"switchyard.dev/libs/nixl/nixltest"
)

func TestMain(m *testing.M) {
	// Keep UCX's tcp transport off the machine's external interface.
	if os.Getenv("UCX_NET_DEVICES") == "" {
		os.Setenv("UCX_NET_DEVICES", "lo")
	}
	os.Exit(m.Run())
}

func setup(testing.TB) (a, b nixl.BackendFactory) {
	return ucx.New(ucx.Config{}), ucx.New(ucx.Config{})
}

// benchSetup follows UCX_TLS: restricted to shared memory, endpoints must
// go without peer error handling (see Config.NoPeerErrHandling).
func benchSetup(testing.TB) (a, b nixl.BackendFactory) {
	tls := os.Getenv("UCX_TLS")
	cfg := ucx.Config{NoPeerErrHandling: tls != "" && !strings.Contains(tls, "tcp") && !strings.Contains(tls, "all")}
	return ucx.New(cfg), ucx.New(cfg)
}

func BenchmarkUCX(b *testing.B) { nixltest.Bench(b, benchSetup) }

// TestContract runs with UCX's transport choice (UCX_TLS, default all;
// with peer error handling UCX uses tcp for messages and cma or tcp for
// RMA here).
func TestContract(t *testing.T) {
	nixltest.Run(t, setup, nixltest.Caps{Backend: ucx.Name})
}

// TestContractSharedMemory forces shared memory only (posix/sysv/cma),
// which needs endpoints without peer error handling.
func TestContractSharedMemory(t *testing.T) {
	t.Setenv("UCX_TLS", "sm")
	shm := func(testing.TB) (a, b nixl.BackendFactory) {
		cfg := ucx.Config{NoPeerErrHandling: true}
		return ucx.New(cfg), ucx.New(cfg)
	}
	nixltest.Run(t, shm, nixltest.Caps{Backend: ucx.Name, NoPeerFailure: true})
}
