package worker

import (
	"maps"
	"testing"

	"google.golang.org/protobuf/proto"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	"switchyard.dev/libs/cuda"
	"switchyard.dev/libs/engine"
)

func TestMetaAndGPUInfo(t *testing.T) {
	t.Parallel()
	got := Meta("llama", engine.ModelInfo{VocabSize: 512, ContextLen: 512, BlockSize: 16, NumBlocks: 512})
	want := map[string]string{"kv_blocks": "512", "block_size": "16", "context_length": "512", "vocab_size": "512", "executor": "llama"}
	if !maps.Equal(got, want) {
		t.Fatalf("Meta = %v; want %v", got, want)
	}
	gpus := GPUInfo([]cuda.GPU{{Index: 1, Name: "H200", UUID: "GPU-1", MemoryTotalBytes: 141 << 30, MemoryUsedBytes: 1 << 30, UtilizationPercent: 42}})
	wantGPU := &commonv1.GpuInfo{Index: 1, Name: "H200", Uuid: "GPU-1", MemoryTotalBytes: 141 << 30, MemoryUsedBytes: 1 << 30, UtilizationPercent: 42}
	if len(gpus) != 1 || !proto.Equal(gpus[0], wantGPU) {
		t.Fatalf("GPUInfo = %v; want [%v]", gpus, wantGPU)
	}
	if got := GPUInfo(nil); len(got) != 0 {
		t.Fatalf("GPUInfo(nil) = %v; want empty", got)
	}
}
