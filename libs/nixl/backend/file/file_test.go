//go:build unix

package file_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/backend/file"
	"switchyard.dev/libs/nixl/metadata"
	"switchyard.dev/libs/nixl/nixltest"
)

// setup makes every segment a fresh file in a test directory.
func setup(cfg file.Config) nixltest.StorageSetup {
	return func(tb testing.TB) (nixl.StorageFactory, nixltest.NewSegment) {
		dir := tb.TempDir()
		var n atomic.Int64
		return file.New(cfg), func(tb testing.TB, size int) nixl.Segment {
			f := create(tb, filepath.Join(dir, fmt.Sprintf("seg-%d", n.Add(1))))
			return nixl.FileSegment{File: f, Len: uint64(size)}
		}
	}
}

func create(tb testing.TB, path string) *os.File {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = f.Close() })
	return f
}

func TestContract(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  file.Config
	}{
		{"buffered", file.Config{}},
		{"direct", file.Config{Direct: true}},
		{"one at a time, small I/Os", file.Config{Depth: 1, MaxIO: 4096}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			nixltest.RunStorage(t, setup(tc.cfg))
		})
	}
}

// node is an agent with file storage and an arena.
type node struct {
	agent  *nixl.Agent
	mem    []byte
	region nixl.RegionID
}

func newNode(t *testing.T, cfg file.Config, size int) *node {
	t.Helper()
	a, err := nixl.NewAgent(nixl.Config{Name: "self", Storage: []nixl.StorageFactory{file.New(cfg)}})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := arena.Map(size)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = a.Close()
		_ = ar.Close()
	})
	id, err := a.RegisterMemory(ar.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return &node{agent: a, mem: ar.Bytes(), region: id}
}

func (n *node) register(t *testing.T, f *os.File, size int) nixl.RegionID {
	t.Helper()
	id, err := n.agent.RegisterStorage(nixl.FileSegment{File: f, Len: uint64(size)})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (n *node) post(t *testing.T, op nixl.Op, local, remote []nixl.Desc) error {
	t.Helper()
	x, err := n.agent.Post(nixl.XferRequest{Op: op, Peer: n.agent.Name(), Local: local, Remote: remote})
	if err != nil {
		return err
	}
	return x.Wait(t.Context())
}

// TestScatteredBlocks writes thousands of small blocks to scattered
// offsets of one file in one transfer, checks the file's bytes, and reads
// them back: writes at any offset are a file's, unlike an object's.
func TestScatteredBlocks(t *testing.T) {
	t.Parallel()
	const n, size = 3000, 64
	for _, cfg := range []file.Config{{}, {Depth: 8, MaxIO: 8192}} {
		t.Run(fmt.Sprintf("depth %d", cfg.Depth), func(t *testing.T) {
			t.Parallel()
			nd := newNode(t, cfg, 4*n*size)
			f := create(t, filepath.Join(t.TempDir(), "kv"))
			seg := nd.register(t, f, 2*n*size)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range nd.mem[:n*size] {
				nd.mem[i] = byte(r.Uint32())
			}
			perm := r.Perm(2 * n)
			local := make([]nixl.Desc, n)
			remote := make([]nixl.Desc, n)
			for i := range n {
				local[i] = nixl.Desc{Region: nd.region, Offset: uint64(i * size), Len: size}
				remote[i] = nixl.Desc{Region: seg, Offset: uint64(perm[i] * size), Len: size}
			}
			if err := nd.post(t, nixl.Write, local, remote); err != nil {
				t.Fatal(err)
			}
			disk, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			for i := range n {
				if off := perm[i] * size; !bytes.Equal(disk[off:off+size], nd.mem[i*size:(i+1)*size]) {
					t.Fatalf("block %d is not at file offset %d", i, off)
				}
			}
			back := 2 * n * size
			for i := range local {
				local[i].Offset += uint64(back)
			}
			if err := nd.post(t, nixl.Read, local, remote); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(nd.mem[back:back+n*size], nd.mem[:n*size]) {
				t.Fatal("blocks read back differ")
			}
		})
	}
}

// TestTruncatedUnderRegistration: a file cut short while registered makes
// READs past its new end fail, as out of range, without a fault; the rest
// still reads.
func TestTruncatedUnderRegistration(t *testing.T) {
	t.Parallel()
	const size = 1 << 20
	for _, cfg := range []file.Config{{}, {Direct: true}} {
		t.Run(fmt.Sprintf("direct=%v", cfg.Direct), func(t *testing.T) {
			t.Parallel()
			nd := newNode(t, cfg, 2*size)
			f := create(t, filepath.Join(t.TempDir(), "kv"))
			seg := nd.register(t, f, size)
			all := []nixl.Desc{{Region: seg, Len: size}}
			if err := nd.post(t, nixl.Write, []nixl.Desc{{Region: nd.region, Len: size}}, all); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(f.Name(), 8192); err != nil {
				t.Fatal(err)
			}
			err := nd.post(t, nixl.Read, []nixl.Desc{{Region: nd.region, Offset: size, Len: size}}, all)
			if !errors.Is(err, nixl.ErrOutOfRange) || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("READ past the end of a truncated file: %v, want ErrOutOfRange and ErrUnexpectedEOF", err)
			}
			if err := nd.post(t, nixl.Read, []nixl.Desc{{Region: nd.region, Offset: size, Len: 8192}},
				[]nixl.Desc{{Region: seg, Len: 8192}}); err != nil {
				t.Fatalf("READ within what is left: %v", err)
			}
		})
	}
}

// TestFileModes: the caller's file may be closed once registered; a
// read-only file takes READs and fails WRITEs on the handle; an O_APPEND
// file, which would append every write, is refused.
func TestFileModes(t *testing.T) {
	t.Parallel()
	nd := newNode(t, file.Config{}, 1<<20)
	dir := t.TempDir()
	path := filepath.Join(dir, "kv")
	if err := os.WriteFile(path, bytes.Repeat([]byte{7}, 4096), 0o600); err != nil {
		t.Fatal(err)
	}
	local := []nixl.Desc{{Region: nd.region, Len: 4096}}

	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	closed := nd.register(t, f, 4096)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := nd.post(t, nixl.Read, local, []nixl.Desc{{Region: closed, Len: 4096}}); err != nil || nd.mem[4095] != 7 {
		t.Fatalf("READ after the caller closed its file: %v (byte %d)", err, nd.mem[4095])
	}

	ro, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ro.Close() })
	rid := nd.register(t, ro, 4096)
	if err := nd.post(t, nixl.Read, local, []nixl.Desc{{Region: rid, Len: 4096}}); err != nil {
		t.Fatalf("READ of a read-only file: %v", err)
	}
	if err := nd.post(t, nixl.Write, local, []nixl.Desc{{Region: rid, Len: 4096}}); err == nil {
		t.Fatal("WRITE to a read-only file succeeded")
	}

	app, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Close() })
	if _, err := nd.agent.RegisterStorage(nixl.FileSegment{File: app, Len: 4096}); err == nil {
		t.Fatal("registered an O_APPEND file")
	}
}

// TestStorageOnlyAgent: an agent with storage and no network backend
// advertises none, transfers to a peer name fail as unknown, and one
// backend serves a kind of storage.
func TestStorageOnlyAgent(t *testing.T) {
	t.Parallel()
	nd := newNode(t, file.Config{}, 4096)
	if _, err := nd.agent.Post(nixl.XferRequest{Op: nixl.Read, Peer: "other"}); !errors.Is(err, nixl.ErrUnknownPeer) {
		t.Fatalf("Post to another agent: %v, want ErrUnknownPeer", err)
	}
	if _, err := nixl.NewAgent(nixl.Config{Name: "two", Storage: []nixl.StorageFactory{file.New(file.Config{}), file.New(file.Config{})}}); err == nil {
		t.Fatal("agent with two file backends")
	}
	blob, err := nd.agent.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.Decode(blob)
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Backends) != 0 {
		t.Fatalf("metadata advertises %+v; storage backends serve no peer", md.Backends)
	}
}
