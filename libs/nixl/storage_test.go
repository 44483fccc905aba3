package nixl_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/backend/file"
	"switchyard.dev/libs/nixl/backend/tcp"
	"switchyard.dev/libs/nixl/metadata"
)

// TestStorageIsPrivate: an agent's storage regions are its own. They are
// not in its metadata (registering one makes no newer blob), a peer's
// transfer to one fails at Post, and one through metadata that names it
// anyway is refused by the agent. A transfer naming the agent itself goes
// to its storage, though it has a network backend too.
func TestStorageIsPrivate(t *testing.T) {
	t.Parallel()
	mk := func(name string, storage ...nixl.StorageFactory) *nixl.Agent {
		a, err := nixl.NewAgent(nixl.Config{Name: name, Backends: []nixl.BackendFactory{tcp.New(tcp.Config{})}, Storage: storage})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Close() })
		return a
	}
	a, b := mk("a", file.New(file.Config{})), mk("b")
	ar, err := arena.Map(8192)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ar.Close() })
	mem, err := a.RegisterMemory(ar.Bytes()[:4096])
	if err != nil {
		t.Fatal(err)
	}
	bmem, err := b.RegisterMemory(ar.Bytes()[4096:])
	if err != nil {
		t.Fatal(err)
	}
	before := decode(t, a)
	f, err := os.Create(filepath.Join(t.TempDir(), "kv"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	seg, err := a.RegisterStorage(nixl.FileSegment{File: f, Len: 4096})
	if err != nil {
		t.Fatal(err)
	}
	after := decode(t, a)
	if after.Gen != before.Gen || len(after.Regions) != 1 {
		t.Fatalf("after RegisterStorage: generation %d (was %d), regions %+v", after.Gen, before.Gen, after.Regions)
	}

	copy(ar.Bytes(), bytes.Repeat([]byte("kv"), 2048))
	x, err := a.Post(nixl.XferRequest{Op: nixl.Write, Peer: "a",
		Local: []nixl.Desc{{Region: mem, Len: 4096}}, Remote: []nixl.Desc{{Region: seg, Len: 4096}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(f.Name()); !bytes.Equal(got, ar.Bytes()[:4096]) {
		t.Fatal("the agent's WRITE to itself did not reach its file")
	}

	if err := b.LoadRemoteAgent(after); err != nil {
		t.Fatal(err)
	}
	read := nixl.XferRequest{Op: nixl.Read, Peer: "a",
		Local: []nixl.Desc{{Region: bmem, Len: 64}}, Remote: []nixl.Desc{{Region: seg, Len: 64}}}
	if _, err := b.Post(read); !errors.Is(err, nixl.ErrUnknownRegion) {
		t.Fatalf("peer's Post to a storage region: %v, want ErrUnknownRegion", err)
	}
	forged := decode(t, a)
	forged.Regions = append(forged.Regions, metadata.Region{ID: uint32(seg), Len: 4096})
	if err := b.LoadRemoteAgent(forged); err != nil {
		t.Fatal(err)
	}
	x, err = b.Post(read)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Wait(t.Context()); !errors.Is(err, nixl.ErrRemote) || !errors.Is(err, nixl.ErrUnknownRegion) {
		t.Fatalf("peer's READ of a storage region named in forged metadata: %v, want ErrRemote and ErrUnknownRegion", err)
	}
}

func decode(t *testing.T, a *nixl.Agent) *metadata.Agent {
	t.Helper()
	blob, err := a.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.Decode(blob)
	if err != nil {
		t.Fatal(err)
	}
	return md
}
