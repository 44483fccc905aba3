//go:build cgo

package cuda

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// On a machine without a driver (CI), Open reports no GPU with exactly one
// log line and no error. On a GPU machine it lists the devices.
func TestOpenWithoutGPUIsClean(t *testing.T) {
	var logs bytes.Buffer
	inv := Open(slog.New(slog.NewTextHandler(&logs, nil)))
	defer inv.Close()
	gpus, err := inv.GPUs(context.Background())
	if err != nil {
		t.Fatalf("GPUs: %v", err)
	}
	if _, none := inv.(None); !none {
		t.Logf("NVML present: %d GPUs", len(gpus))
		return
	}
	if len(gpus) != 0 {
		t.Fatalf("None listed %d GPUs", len(gpus))
	}
	lines := strings.Count(logs.String(), "\n")
	if lines != 1 || !strings.Contains(logs.String(), "no GPU") {
		t.Fatalf("want exactly one 'no GPU' log line, got %d:\n%s", lines, logs.String())
	}
}

// Against go-nvml's simulated DGX H100, the inventory lists eight devices
// with names and memory.
func TestInventoryOverSimulatedDGX(t *testing.T) {
	srv := dgxh100.New()
	for _, d := range srv.Devices {
		// the simulator leaves utilization out; report a fixed 42%
		d.(*server.Device).GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
			return nvml.Utilization{Gpu: 42}, nvml.SUCCESS
		}
	}
	inv := open(srv, nil)
	defer inv.Close()
	gpus, err := inv.GPUs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 8 {
		t.Fatalf("got %d GPUs, want 8", len(gpus))
	}
	for i, g := range gpus {
		if g.Index != i || !strings.Contains(g.Name, "H100") || g.MemoryTotalBytes == 0 || g.UUID == "" || g.UtilizationPercent != 42 {
			t.Fatalf("gpu %d = %+v", i, g)
		}
	}
	m := Meta(gpus)
	if m["gpu_count"] != "8" || !strings.Contains(m["gpu0_name"], "H100") {
		t.Fatalf("Meta = %v", m)
	}
}

func TestCancelledContext(t *testing.T) {
	inv := open(dgxh100.New(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := inv.GPUs(ctx); err == nil {
		t.Fatal("GPUs with a cancelled context succeeded")
	}
}
