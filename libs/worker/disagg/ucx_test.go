//go:build ucx && cgo

package disagg

import (
	"os"
	"testing"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/backend/ucx"
)

func ucxBackend(testing.TB) nixl.BackendFactory { return ucx.New(ucx.Config{}) }

// TestUCX runs the suite over UCX (its defaults: tcp/cma on loopback).
func TestUCX(t *testing.T) {
	if os.Getenv("UCX_NET_DEVICES") == "" {
		t.Setenv("UCX_NET_DEVICES", "lo")
	}
	runContract(t, ucxBackend)
}

// BenchmarkUCXTransferShare is BenchmarkTransferShare over ucx.
func BenchmarkUCXTransferShare(b *testing.B) {
	if os.Getenv("UCX_NET_DEVICES") == "" {
		b.Setenv("UCX_NET_DEVICES", "lo")
	}
	benchTransferShare(b, ucxBackend)
}
