package tcp_test

import (
	"testing"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/backend/tcp"
	"switchyard.dev/libs/nixl/nixltest"
)

func setup(testing.TB) (a, b nixl.BackendFactory) {
	return tcp.New(tcp.Config{}), tcp.New(tcp.Config{})
}

func TestContract(t *testing.T) {
	nixltest.Run(t, setup, nixltest.Caps{RemoteValidation: true, Backend: tcp.Name})
}

func BenchmarkTCP(b *testing.B) { nixltest.Bench(b, setup) }
