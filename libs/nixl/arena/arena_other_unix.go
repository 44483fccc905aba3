//go:build unix && !linux

package arena

func mapAnon(size int) (*Arena, error) { return mapPlain(size) }

func populate([]byte) bool { return false }
