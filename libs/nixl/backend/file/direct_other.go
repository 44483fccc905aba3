//go:build unix && !linux

package file

import "log/slog"

// withDirect leaves f buffered: O_DIRECT is Linux's.
func withDirect(*file, int, bool, *slog.Logger) {}
