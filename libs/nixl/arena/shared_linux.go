package arena

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

func mapShared(size int) (*Arena, error) {
	fd, err := unix.MemfdCreate("switchyard-arena", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "memfd:switchyard-arena")
	if err := f.Truncate(int64(size)); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	a := &Arena{mem: mem, file: f}
	a.unmap = func() error {
		shared.remove(a)
		return errors.Join(unix.Munmap(mem), f.Close())
	}
	a.huge = size >= HugePage && unix.Madvise(mem, unix.MADV_HUGEPAGE) == nil
	return a, nil
}

// MapFile maps size bytes of a memory file another process shared
// (SharedFile), read-write and shared. The caller unmaps it with Close.
func MapFile(f *os.File, size int) (*Arena, error) {
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return &Arena{mem: mem, unmap: func() error { return unix.Munmap(mem) }}, nil
}
