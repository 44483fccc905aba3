// Package arena maps memory outside the Go heap for use as registered
// transfer memory.
//
// Transfer backends hand raw addresses to the kernel or to UCX and may keep
// them for the life of a registration; Go heap memory is off limits for that
// (cgo pointer rules, and the collector owns it). An anonymous mmap is never
// scanned or moved, so it is the shape KV arenas take in the engine and the
// shape tests use here.
//
// On Linux an arena of at least one huge page (2 MiB) is aligned to huge
// pages and advised MADV_HUGEPAGE, so that with transparent huge pages in
// "madvise" mode (the common default) it is backed by 2 MiB pages. That
// matters for transfers: shared-memory transports pin and copy the pages
// of every transfer (cma), and 512 times fewer pages made 16 MiB WRITEs
// over UCX sm about twice as fast here (libs/nixl/README.md). It also
// spares the engine's attention loops TLB misses over a large KV arena.
//
// MapShared maps an arena backed by a memory file instead, which another
// process can map too (MapFile): the UCX backend's child process reads
// and writes a worker's KV arena in place that way. SharedFile finds the
// file behind any slice of such an arena.
package arena

import (
	"fmt"
	"os"
	"sync"
)

// HugePage is the huge page size arenas are aligned to where the system
// supports transparent huge pages.
const HugePage = 2 << 20

// Arena is one anonymous mapping. Bytes is valid until Close.
type Arena struct {
	mem   []byte
	huge  bool
	file  *os.File // MapShared's memory file
	unmap func() error
	once  sync.Once
	err   error
}

// Map maps size bytes of zeroed, private, anonymous memory.
func Map(size int) (*Arena, error) {
	if size <= 0 {
		return nil, fmt.Errorf("arena: size %d must be positive", size)
	}
	a, err := mapAnon(size)
	if err != nil {
		return nil, fmt.Errorf("arena: mmap %d bytes: %w", size, err)
	}
	return a, nil
}

// Bytes returns the mapping. Deregister it from every agent before Close.
func (a *Arena) Bytes() []byte { return a.mem }

// Huge reports whether the arena was aligned to huge pages and advised to
// use them (the kernel may still back it with small pages).
func (a *Arena) Huge() bool { return a.huge }

// Close unmaps the arena; later calls return the first result.
func (a *Arena) Close() error {
	a.once.Do(func() {
		if err := a.unmap(); err != nil {
			a.err = fmt.Errorf("arena: munmap: %w", err)
		}
		a.mem = nil
	})
	return a.err
}

// Prefault backs every page of the arena with memory now, so that no later
// write pays for the first touch (here about 2.6 GB/s, slower than the
// copies an arena exists for). Linux does it in one madvise call
// (MADV_POPULATE_WRITE, 5.14 and later); elsewhere, or on older kernels,
// one byte of every page is written.
func (a *Arena) Prefault() {
	if populate(a.mem) {
		return
	}
	for i := 0; i < len(a.mem); i += pageSize {
		a.mem[i] = 0
	}
}
