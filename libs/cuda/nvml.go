//go:build cgo

package cuda

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Open initializes NVML. Without a driver it logs one line and returns None.
func Open(log *slog.Logger) Inventory {
	return open(nvml.New(), log)
}

func open(lib nvml.Interface, log *slog.Logger) Inventory {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if ret := safeInit(lib); ret != nvml.SUCCESS {
		log.Info("no GPU: NVML unavailable", "reason", nvml.ErrorString(ret))
		return None{}
	}
	return &nvmlInventory{lib: lib}
}

// safeInit guards against a broken driver library panicking in Init.
func safeInit(lib nvml.Interface) (ret nvml.Return) {
	defer func() {
		if recover() != nil {
			ret = nvml.ERROR_UNKNOWN
		}
	}()
	return lib.Init()
}

type nvmlInventory struct{ lib nvml.Interface }

func (n *nvmlInventory) GPUs(ctx context.Context) ([]GPU, error) {
	count, ret := n.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("cuda: device count: %s", nvml.ErrorString(ret))
	}
	out := make([]GPU, 0, count)
	for i := range count {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d, ret := n.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("cuda: device %d: %s", i, nvml.ErrorString(ret))
		}
		g := GPU{Index: i}
		g.Name, _ = d.GetName()
		g.UUID, _ = d.GetUUID()
		if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.MemoryTotalBytes, g.MemoryUsedBytes = mem.Total, mem.Used
		}
		if u, ret := d.GetUtilizationRates(); ret == nvml.SUCCESS {
			g.UtilizationPercent = u.Gpu
		}
		out = append(out, g)
	}
	return out, nil
}

func (n *nvmlInventory) Close() error {
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("cuda: shutdown: %s", nvml.ErrorString(ret))
	}
	return nil
}
