package file

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
)

// directOK reports whether dir's filesystem opens files with O_DIRECT.
func directOK(t *testing.T, dir string) bool {
	t.Helper()
	fd, err := unix.Open(filepath.Join(dir, "probe"), unix.O_RDWR|unix.O_CREAT|unix.O_DIRECT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return false
	}
	_ = unix.Close(fd)
	return true
}

// TestDirect: with Config.Direct an aligned I/O takes the O_DIRECT
// descriptor where the filesystem has one (tmpfs has none, and every I/O
// stays buffered); a caller's O_DIRECT file gets a buffered descriptor
// for unaligned I/Os. Bytes land the same either way.
func TestDirect(t *testing.T) {
	t.Parallel()
	dirs := []string{t.TempDir()}
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		shm, err := os.MkdirTemp("/dev/shm", "nixl-file-test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(shm) })
		dirs = append(dirs, shm)
	}
	ar, err := arena.Map(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ar.Close() })
	mem := ar.Bytes()
	for i := range mem {
		mem[i] = byte(i * 7)
	}
	for _, dir := range dirs {
		ok := directOK(t, dir)
		for _, callerDirect := range []bool{false, true} {
			if callerDirect && !ok {
				continue
			}
			flags := os.O_RDWR | os.O_CREATE
			if callerDirect {
				flags |= unix.O_DIRECT
			}
			f, err := os.OpenFile(filepath.Join(dir, "kv"), flags, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			sb, err := New(Config{Direct: !callerDirect})(nixl.Env{})
			if err != nil {
				t.Fatal(err)
			}
			b := sb.(*Backend)
			if err := b.RegisterStorage(1, nixl.FileSegment{File: f, Len: 1 << 20}); err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
			fl := b.files[1]
			if (fl.direct >= 0) != ok || fl.buffered < 0 {
				t.Fatalf("%s (caller O_DIRECT %v): descriptors %+v; filesystem takes O_DIRECT: %v", dir, callerDirect, *fl, ok)
			}
			aligned := op{f: fl, off: 4096, bufs: [][]byte{mem[8192:16384]}, n: 8192}
			unaligned := op{f: fl, off: 4096 + 512, bufs: [][]byte{mem[100:4196]}, n: 4096}
			if ok && aligned.fd() != fl.direct || unaligned.fd() != fl.buffered {
				t.Fatalf("%s: aligned I/O on %d, unaligned on %d; descriptors %+v", dir, aligned.fd(), unaligned.fd(), *fl)
			}
			for _, o := range []op{aligned, unaligned} {
				if err := o.do(true); err != nil {
					t.Fatalf("%s: write: %v", dir, err)
				}
				got := make([]byte, o.n)
				if _, err := unix.Pread(fl.buffered, got, o.off); err != nil || !bytes.Equal(got, o.bufs[0]) {
					t.Fatalf("%s: file differs after a write at %d (%v)", dir, o.off, err)
				}
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
