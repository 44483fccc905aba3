//go:build !unix

package kvcache

// mapArena falls back to heap memory where mmap is unavailable; such a
// build cannot hand the arena to a transfer library.
func mapArena(size int) ([]byte, func() error, error) {
	return make([]byte, size), func() error { return nil }, nil
}
