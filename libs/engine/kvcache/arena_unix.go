//go:build unix

package kvcache

import (
	"fmt"
	"syscall"
)

// mapArena maps anonymous memory outside the Go heap: the garbage collector
// never moves or scans it, so a transfer library may register it with a
// NIC and cgo code may hold pointers into it.
func mapArena(size int) ([]byte, func() error, error) {
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, nil, fmt.Errorf("kvcache: mmap %d bytes: %w", size, err)
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
