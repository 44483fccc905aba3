package tiertest

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// RefuseWrites makes every descriptor this process holds open on path
// read-only, in place: the kernel then refuses each write to the file
// (EBADF) while reads go on returning what it holds, as on a disk that
// went read-only or bad after the tier opened it. Nothing in the tier is
// replaced or wrapped: its own descriptor now names a read-only open of
// the same file. (Changing the file's mode or replacing the file would
// not do: an open descriptor keeps the access and the inode it was opened
// with.) restore puts the original descriptors back; it runs at the
// test's cleanup if not before, and must run while the tier still has the
// file open, so call RefuseWrites after opening the tier (cleanups run
// last registered first).
func RefuseWrites(t testing.TB, path string) (restore func()) {
	t.Helper()
	want, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	if want, err = filepath.Abs(want); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd to find the file's descriptors: %v", err)
	}
	// First find them all: the descriptors made below take numbers the
	// listing may show as another file's (its own, closed since).
	var fds []int
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == want {
			fds = append(fds, fd)
		}
	}
	type swapped struct{ fd, saved int }
	var done []swapped
	for _, fd := range fds {
		saved, err := syscall.Dup(fd) // keeps the description, and the tier's lock with it
		if err != nil {
			t.Fatal(err)
		}
		ro, err := syscall.Open(want, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = syscall.Dup3(ro, fd, syscall.O_CLOEXEC)
		_ = syscall.Close(ro)
		if err != nil {
			t.Fatal(err)
		}
		done = append(done, swapped{fd, saved})
	}
	if len(done) == 0 {
		t.Fatalf("no descriptor of this process is open on %s", want)
	}
	var once sync.Once
	restore = func() {
		once.Do(func() {
			for _, s := range done {
				if err := syscall.Dup3(s.saved, s.fd, syscall.O_CLOEXEC); err != nil {
					t.Errorf("restoring %s: %v", want, err)
				}
				_ = syscall.Close(s.saved)
			}
		})
	}
	t.Cleanup(restore)
	return restore
}
