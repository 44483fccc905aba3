// Package cuda reports the machine's GPUs: name, memory and utilization, as
// the driver sees them through NVML (github.com/NVIDIA/go-nvml).
//
// Workers put the inventory in their discovery record and metrics. A machine
// without a GPU or driver is normal (CI, laptops, the sim executor): Open then
// returns an inventory that reports no GPUs, after one log line, and never
// fails or panics. NVML needs cgo; a build without cgo always reports none.
package cuda

import (
	"context"
	"fmt"
	"strconv"
)

// GPU is one device.
type GPU struct {
	Index              int
	Name               string
	UUID               string
	MemoryTotalBytes   uint64
	MemoryUsedBytes    uint64
	UtilizationPercent uint32
}

// Inventory lists GPUs.
type Inventory interface {
	// GPUs returns the devices now, with current memory and utilization.
	GPUs(ctx context.Context) ([]GPU, error)
	// Close releases the driver.
	Close() error
}

// None is the inventory of a machine without GPUs.
type None struct{}

// GPUs returns no devices.
func (None) GPUs(context.Context) ([]GPU, error) { return nil, nil }

// Close does nothing.
func (None) Close() error { return nil }

// Meta renders GPUs as discovery metadata: gpu_count, and per device
// gpu<i>_name and gpu<i>_mem_total.
func Meta(gpus []GPU) map[string]string {
	m := map[string]string{"gpu_count": strconv.Itoa(len(gpus))}
	for _, g := range gpus {
		p := fmt.Sprintf("gpu%d_", g.Index)
		m[p+"name"] = g.Name
		m[p+"mem_total"] = strconv.FormatUint(g.MemoryTotalBytes, 10)
	}
	return m
}
