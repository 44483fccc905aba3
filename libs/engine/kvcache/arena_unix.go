//go:build unix

package kvcache

import (
	"fmt"

	"switchyard.dev/libs/nixl/arena"
)

// mapArena maps anonymous memory outside the Go heap: the garbage collector
// never moves or scans it, so a transfer library may register it with a
// NIC and cgo code may hold pointers into it. It is the transfer library's
// own arena, huge-page aligned where that pays (see package arena); shared,
// it is backed by a memory file another process may map.
func mapArena(size int, shared bool) ([]byte, func() error, error) {
	mapper := arena.Map
	if shared {
		mapper = arena.MapShared
	}
	a, err := mapper(size)
	if err != nil {
		return nil, nil, fmt.Errorf("kvcache: %w", err)
	}
	return a.Bytes(), a.Close, nil
}
