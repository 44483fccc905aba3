package disagg

import (
	"testing"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/backend/tcp"
)

func tcpBackend(testing.TB) nixl.BackendFactory { return tcp.New(tcp.Config{}) }

func TestTCP(t *testing.T) {
	t.Parallel()
	runContract(t, tcpBackend)
}
