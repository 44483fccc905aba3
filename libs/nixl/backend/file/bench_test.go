//go:build unix

package file_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/backend/file"
	"switchyard.dev/libs/nixl/nixltest"
)

// BenchmarkFile: whole-file WRITEs and READs through the agent, as
// nixltest.BenchStorage shapes them; BenchmarkRaw is the same shape in
// bare pwrite/pread calls, the baseline (fio's psync engine, as it were).
func BenchmarkFile(b *testing.B) {
	b.Run("Buffered", func(b *testing.B) { nixltest.BenchStorage(b, setup(file.Config{})) })
	b.Run("Direct", func(b *testing.B) { nixltest.BenchStorage(b, setup(file.Config{Direct: true})) })
}

func BenchmarkRaw(b *testing.B) {
	for _, write := range []bool{true, false} {
		for _, size := range nixltest.BenchSizes {
			b.Run(fmt.Sprintf("%s/%s", rawName(write), nixltest.SizeName(size)), func(b *testing.B) { benchRaw(b, write, size) })
		}
	}
}

func rawName(write bool) string {
	if write {
		return "Pwrite"
	}
	return "Pread"
}

// benchRaw: BenchDepth goroutines, each one call of size bytes at a time
// on a file and memory of its own.
func benchRaw(b *testing.B, write bool, size int) {
	ar, err := arena.Map(max(size*nixltest.BenchDepth, arena.HugePage))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ar.Close() })
	dir := b.TempDir()
	fds := make([]int, nixltest.BenchDepth)
	for i := range fds {
		f := create(b, filepath.Join(dir, fmt.Sprintf("raw-%d", i)))
		fds[i] = int(f.Fd())
		if _, err := unix.Pwrite(fds[i], slot(ar, i, size), 0); err != nil { // as the agent's warm-up
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	nixltest.RawWindow(b, nixltest.BenchDepth, func(i int) error {
		return full(fds[i], slot(ar, i, size), write)
	})
}

func slot(ar *arena.Arena, i, size int) []byte { return ar.Bytes()[i*size : (i+1)*size] }

func full(fd int, buf []byte, write bool) error {
	var n int
	var err error
	if write {
		n, err = unix.Pwrite(fd, buf, 0)
	} else {
		n, err = unix.Pread(fd, buf, 0)
	}
	if err == nil && n != len(buf) {
		err = fmt.Errorf("%d of %d bytes", n, len(buf))
	}
	return err
}

// BenchmarkBlocks: 512 blocks of 16 KiB, scattered in memory and back to
// back in one file, in one transfer (a KV offload of 512 blocks); the raw
// baseline is one pwrite/pread a block, one at a time.
func BenchmarkBlocks(b *testing.B) {
	const n, size = 512, 16 << 10
	for _, op := range []nixl.Op{nixl.Write, nixl.Read} {
		b.Run(fmt.Sprintf("Agent/%v", op), func(b *testing.B) { benchBlocksAgent(b, op, n, size) })
		b.Run(fmt.Sprintf("Raw/%v", op), func(b *testing.B) { benchBlocksRaw(b, op == nixl.Write, n, size) })
	}
}

// blockSlots places block i at memory slot perm[i] of 2n: every other
// slot, shuffled, so no two blocks are adjacent in memory.
func blockSlots(n int) []int {
	perm := rand.New(rand.NewPCG(1, 2)).Perm(n)
	for i := range perm {
		perm[i] *= 2
	}
	return perm
}

func benchBlocksAgent(b *testing.B, op nixl.Op, n, size int) {
	a, err := nixl.NewAgent(nixl.Config{Name: "self", Storage: []nixl.StorageFactory{file.New(file.Config{})}})
	if err != nil {
		b.Fatal(err)
	}
	ar, err := arena.Map(2 * n * size)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = a.Close()
		_ = ar.Close()
	})
	mem, err := a.RegisterMemory(ar.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	f := create(b, filepath.Join(b.TempDir(), "kv"))
	seg, err := a.RegisterStorage(nixl.FileSegment{File: f, Len: uint64(n * size)})
	if err != nil {
		b.Fatal(err)
	}
	local := make([]nixl.Desc, n)
	remote := make([]nixl.Desc, n)
	for i, s := range blockSlots(n) {
		local[i] = nixl.Desc{Region: mem, Offset: uint64(s * size), Len: uint64(size)}
		remote[i] = nixl.Desc{Region: seg, Offset: uint64(i * size), Len: uint64(size)}
	}
	warm, err := a.Post(nixl.XferRequest{Op: nixl.Write, Peer: "self", Local: local, Remote: remote})
	if err != nil {
		b.Fatal(err)
	}
	if err := warm.Wait(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(n * size))
	b.ResetTimer()
	nixltest.Window(b, a, []nixl.XferRequest{{Op: op, Peer: "self", Local: local, Remote: remote}})
}

func benchBlocksRaw(b *testing.B, write bool, n, size int) {
	ar, err := arena.Map(2 * n * size)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ar.Close() })
	fd := int(create(b, filepath.Join(b.TempDir(), "kv")).Fd())
	slots := blockSlots(n)
	pass := func(write bool) error {
		for i, s := range slots {
			buf := ar.Bytes()[s*size : (s+1)*size]
			var err error
			if write {
				_, err = unix.Pwrite(fd, buf, int64(i*size))
			} else {
				_, err = unix.Pread(fd, buf, int64(i*size))
			}
			if err != nil {
				return err
			}
		}
		return nil
	}
	if err := pass(true); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(n * size))
	b.ResetTimer()
	for range b.N {
		if err := pass(write); err != nil {
			b.Fatal(err)
		}
	}
}
