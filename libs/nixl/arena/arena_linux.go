package arena

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapAnon maps size bytes. From one huge page up it maps a huge page more,
// trims the ends so the arena starts on a huge page boundary, and advises
// huge pages; the advice is best effort (a kernel without THP refuses it).
func mapAnon(size int) (*Arena, error) {
	if size < HugePage {
		return mapPlain(size)
	}
	span := uintptr(size) + HugePage
	base, err := unix.MmapPtr(-1, 0, nil, span, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	head := -uintptr(base) & (HugePage - 1) // bytes up to the first boundary
	length := roundPage(uintptr(size))
	start := unsafe.Add(base, head)
	if head > 0 {
		_ = unix.MunmapPtr(base, head)
	}
	if tail := span - head - length; tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(start, length), tail)
	}
	mem := unsafe.Slice((*byte)(start), size)
	a := &Arena{mem: mem, unmap: func() error { return unix.MunmapPtr(start, length) }}
	a.huge = unix.Madvise(mem, unix.MADV_HUGEPAGE) == nil
	return a, nil
}

func roundPage(n uintptr) uintptr {
	p := uintptr(unix.Getpagesize())
	return (n + p - 1) &^ (p - 1)
}

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14), which x/sys does
// not name yet.
const madvPopulateWrite = 23

func populate(mem []byte) bool { return unix.Madvise(mem, madvPopulateWrite) == nil }
