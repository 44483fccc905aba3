package route

import (
	"fmt"
	"testing"

	routerv1 "switchyard.dev/gen/switchyard/router/v1"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/radix"
)

// BenchmarkRoute measures one KV-aware decision (hash, match, score, pick,
// record load) for a 128-block prompt whose prefix is shared by a quarter
// of the workers, over an index of 4096 prompts × 128 blocks (~500k
// blocks) spread over the workers.
func BenchmarkRoute(b *testing.B) {
	for _, n := range []int{8, 64, 512} {
		b.Run(fmt.Sprintf("workers=%d", n), func(b *testing.B) {
			r := newRouter(b, nil)
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("w%03d", i)
				_ = r.cfg.Index.AddWorker(ids[i])
			}
			r.SetWorkers(instances(discovery.RoleDecode, "m", ids...), nil)
			for p := range 4096 {
				hs := kvhash.BlockHashes(tokens(128*bs, p), bs, 0)
				_ = r.cfg.Index.Apply(ids[p%n], radix.StoredEvent(kvtier.Device, hs...))
			}
			prompt := tokens(128*bs, 1)
			hs := kvhash.BlockHashes(prompt, bs, 0)
			for i := 0; i < n; i += 4 {
				_ = r.cfg.Index.Apply(ids[i], radix.StoredEvent(kvtier.Host, hs[:64]...))
			}
			for _, omit := range []bool{false, true} {
				b.Run(fmt.Sprintf("omit_candidates=%v", omit), func(b *testing.B) {
					req := &routerv1.RouteRequest{RequestId: "q", Model: "m", TokenIds: prompt, OmitCandidates: omit}
					b.ReportAllocs()
					for b.Loop() {
						if _, err := r.Decide(b.Context(), req); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}
