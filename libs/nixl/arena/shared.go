package arena

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"unsafe"
)

// MapShared maps size bytes of zeroed memory backed by a memory file
// (memfd on Linux) instead of anonymous memory, so that another process
// handed the file (SharedFile) maps the same pages. The UCX transfer
// backend runs UCX in a child process that way: it reads and writes the
// KV arena in place, and an abort inside UCX ends only the child.
//
// The kernel backs such memory with huge pages only where shmem huge
// pages are enabled (/sys/kernel/mm/transparent_hugepage/shmem_enabled
// "advise" or "always"; most distributions ship "never"); Huge reports
// the advice, as for Map.
func MapShared(size int) (*Arena, error) {
	if size <= 0 {
		return nil, fmt.Errorf("arena: size %d must be positive", size)
	}
	a, err := mapShared(size)
	if err != nil {
		return nil, fmt.Errorf("arena: shared mapping of %d bytes: %w", size, err)
	}
	shared.add(a)
	return a, nil
}

// SharedFile returns the memory file behind mem and mem's offset in it,
// if mem lies in one arena from MapShared that is still mapped. The file
// stays open until that arena's Close.
func SharedFile(mem []byte) (f *os.File, off int64, ok bool) {
	if len(mem) == 0 {
		return nil, 0, false
	}
	return shared.find(uintptr(unsafe.Pointer(unsafe.SliceData(mem))), len(mem))
}

// shared indexes the live shared arenas by address: a transfer backend
// is handed slices of them, not the arenas.
var shared sharedSet

type sharedSet struct {
	mu  sync.Mutex
	all []*Arena // by base address
}

func (s *sharedSet) add(a *Arena) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.all), func(i int) bool { return base(s.all[i]) > base(a) })
	s.all = append(s.all, nil)
	copy(s.all[i+1:], s.all[i:])
	s.all[i] = a
}

func (s *sharedSet) remove(a *Arena) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.all {
		if x == a {
			s.all = append(s.all[:i], s.all[i+1:]...)
			return
		}
	}
}

func (s *sharedSet) find(p uintptr, n int) (*os.File, int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.all), func(i int) bool { return base(s.all[i]) > p }) - 1
	if i < 0 {
		return nil, 0, false
	}
	a := s.all[i]
	off := p - base(a)
	if off+uintptr(n) > uintptr(len(a.mem)) {
		return nil, 0, false
	}
	return a.file, int64(off), true
}

func base(a *Arena) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(a.mem))) }
