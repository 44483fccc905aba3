package disagg

import (
	"context"
	"strconv"
	"testing"

	"connectrpc.com/connect"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/nixl"
)

// BenchmarkTransferShare measures a remote prefill over the tcp backend
// (BenchmarkUCXTransferShare over ucx, with -tags ucx) and reports the KV transfer time as a share of the prefill compute time
// (transfer-%: the writes' summed post-to-done time; tail-%: the part
// left after the first token, i.e. not hidden behind compute). Prompts of
// 256 and 2,048 tokens on a tiny random llama with a 4,096-token context;
// each iteration uses a fresh prompt, so nothing is served from a cache.
func BenchmarkTransferShare(b *testing.B) { benchTransferShare(b, tcpBackend) }

func benchTransferShare(b *testing.B, backend func(testing.TB) nixl.BackendFactory) {
	c := shape
	c.SeqLen = 4096
	for _, n := range []int{256, 2048} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			pre := newEngine(b, c, 512)
			dec := newEngine(b, c, 512)
			da, dr := newAgent(b, b.Name()+"-d", dec.KV().Arena, backend(b))
			pa, pr := newAgent(b, b.Name()+"-p", pre.KV().Arena, backend(b))
			x := NewExporter(ExportConfig{Engine: pre, Agent: pa, Region: pr})
			md, err := da.Metadata()
			if err != nil {
				b.Fatal(err)
			}
			kv := dec.KV()
			blocks := (n - 1) / kv.BlockSize
			var compute, transfer, tail, bytes float64
			for i := 0; b.Loop(); i++ {
				to, err := dec.AllocateForImport(blocks)
				if err != nil {
					b.Fatal(err)
				}
				offs := make([]uint64, len(to))
				for j := range to {
					offs[j] = uint64(to[j].Offset)
				}
				p := prompts(1, 1, uint64(i))[0]
				for len(p) < n {
					p = append(p, uint32(3+(len(p)*31+i*7)%290))
				}
				res, err := x.Prefill(context.Background(), &workerv1.RemotePrefillRequest{TokenIds: p, Target: &workerv1.KvTarget{
					Agent: da.Name(), Metadata: md, Region: uint32(dr), BlockOffsets: offs, BlockBytes: uint64(kv.BlockBytes)}})
				dec.ReleaseBlocks(blockIDs(to))
				if err != nil {
					b.Fatal(connect.CodeOf(err), err)
				}
				compute += float64(res.GetPrefillNanos())
				transfer += float64(res.GetTransferNanos())
				tail += float64(res.GetTransferTailNanos())
				bytes += float64(res.GetBytesWritten())
			}
			b.ReportMetric(100*transfer/compute, "transfer-%")
			b.ReportMetric(100*tail/compute, "tail-%")
			b.ReportMetric(compute/float64(b.N)/1e6, "prefill-ms")
			b.ReportMetric(transfer/float64(b.N)/1e6, "transfer-ms")
			b.ReportMetric(bytes/float64(b.N)/(1<<20), "MiB/op")
		})
	}
}
