package local_test

import (
	"testing"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/backend/local"
	"switchyard.dev/libs/nixl/nixltest"
)

func setup(testing.TB) (a, b nixl.BackendFactory) {
	reg := local.NewRegistry()
	return local.New(reg), local.New(reg)
}

func TestContract(t *testing.T) {
	nixltest.Run(t, setup, nixltest.Caps{RemoteValidation: true, Backend: local.Name})
}

// TestOtherRegistry: metadata from another registry (another process)
// must not resolve locally.
func TestOtherRegistry(t *testing.T) {
	t.Parallel()
	a, err := nixl.NewAgent(nixl.Config{Name: "a", Backends: []nixl.BackendFactory{local.New(local.NewRegistry())}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := nixl.NewAgent(nixl.Config{Name: "b", Backends: []nixl.BackendFactory{local.New(local.NewRegistry())}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	md, err := b.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.LoadRemoteMetadata(md); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Post(nixl.XferRequest{Op: nixl.Write, Peer: "b", Notif: []byte("x")}); err == nil {
		t.Fatal("Post across registries succeeded")
	}
}

func BenchmarkLocal(b *testing.B) { nixltest.Bench(b, setup) }
