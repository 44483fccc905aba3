package vllmevents

import "testing"

// benchPayload is a typical engine step: one BlockStored of 32 blocks of
// 16 tokens with 64-bit hashes, and one BlockRemoved of 32 blocks, in the
// older tagged-array or the newer tagged-map event encoding.
func benchPayload(maps bool) (payload []byte, blocks int) {
	const n, blockSize = 32, 16
	hashes := make(arr, n)
	removed := make(arr, n)
	for i := range hashes {
		hashes[i] = uint64(0x9e3779b97f4a7c15) * uint64(i+1)
		removed[i] = -int64(i+1) * 0x1234567
	}
	toks := tokens(n*blockSize, 100)
	var events arr
	if maps {
		events = arr{
			kv{"type", "BlockStored", "block_hashes", hashes, "parent_block_hash", uint64(77), "token_ids", toks,
				"block_size", blockSize, "lora_id", nil, "medium", "GPU"},
			kv{"type", "BlockRemoved", "block_hashes", removed, "medium", "GPU"},
		}
	} else {
		events = arr{
			arr{"BlockStored", hashes, uint64(77), toks, blockSize, nil, "GPU"},
			arr{"BlockRemoved", removed, "GPU"},
		}
	}
	return newEnc().v(arr{1761234567.5, events, 0}).buf.Bytes(), 2 * n
}

func BenchmarkDecode(b *testing.B) {
	for _, tc := range []struct {
		name string
		maps bool
	}{{"array-events", false}, {"map-events", true}} {
		b.Run(tc.name, func(b *testing.B) {
			payload, blocks := benchPayload(tc.maps)
			var d Decoder
			var batch Batch
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				if err := d.Decode(payload, &batch); err != nil {
					b.Fatal(err)
				}
			}
			if len(batch.Events) != 2 {
				b.Fatalf("decoded %d events", len(batch.Events))
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*blocks), "ns/block")
		})
	}
}
