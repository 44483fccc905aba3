//go:build !cgo

package cuda

import "log/slog"

// Open reports no GPUs: NVML needs cgo, and this build has none.
func Open(log *slog.Logger) Inventory {
	if log != nil {
		log.Info("no GPU: built without cgo, NVML unavailable")
	}
	return None{}
}
