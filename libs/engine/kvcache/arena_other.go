//go:build !unix

package kvcache

import "errors"

// mapArena falls back to heap memory where mmap is unavailable; such a
// build cannot hand the arena to a transfer library.
func mapArena(size int, shared bool) ([]byte, func() error, error) {
	if shared {
		return nil, nil, errors.New("kvcache: shared KV memory needs Linux")
	}
	return make([]byte, size), func() error { return nil }, nil
}
