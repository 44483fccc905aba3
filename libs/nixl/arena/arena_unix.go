//go:build unix

package arena

import "syscall"

// mapPlain maps size bytes with the kernel's choice of address and pages.
func mapPlain(size int) (*Arena, error) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	return &Arena{mem: b, unmap: func() error { return syscall.Munmap(b) }}, nil
}

// pageSize is the stride Prefault touches at: the smallest page size.
var pageSize = syscall.Getpagesize()
