// Package arena maps memory outside the Go heap for use as registered
// transfer memory.
//
// Transfer backends hand raw addresses to the kernel or to UCX and may keep
// them for the life of a registration; Go heap memory is off limits for that
// (cgo pointer rules, and the collector owns it). An anonymous mmap is never
// scanned or moved, so it is the shape KV arenas take in the engine and the
// shape tests use here.
package arena

import (
	"fmt"
	"sync"
	"syscall"
)

// Arena is one anonymous mapping. Bytes is valid until Close.
type Arena struct {
	mem  []byte
	once sync.Once
	err  error
}

// Map maps size bytes of zeroed, private, anonymous memory.
func Map(size int) (*Arena, error) {
	if size <= 0 {
		return nil, fmt.Errorf("arena: size %d must be positive", size)
	}
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("arena: mmap %d bytes: %w", size, err)
	}
	return &Arena{mem: b}, nil
}

// Bytes returns the mapping. Deregister it from every agent before Close.
func (a *Arena) Bytes() []byte { return a.mem }

// Close unmaps the arena; later calls return the first result.
func (a *Arena) Close() error {
	a.once.Do(func() {
		if err := syscall.Munmap(a.mem); err != nil {
			a.err = fmt.Errorf("arena: munmap: %w", err)
		}
		a.mem = nil
	})
	return a.err
}
