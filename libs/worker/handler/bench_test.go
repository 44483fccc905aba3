package handler_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"

	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/worker/handler"
)

// BenchmarkStoredEvent is what one Stored event of a 12,000-token prompt
// (750 blocks of 16, the conversation trace's mean) costs a worker to
// encode and a router to decode, with its token ids and without them
// (SubscribeKvEventsRequest.omit_token_ids), and with gzip on top as
// Connect would apply it (default level; the router's event streams now
// refuse it). wire-B/op is its size on the wire.
func BenchmarkStoredEvent(b *testing.B) {
	const blocks, blockSize = 750, 16
	rng := rand.New(rand.NewPCG(1, 2))
	ev := kvevent.Event{Kind: kvevent.Stored, BlockSize: blockSize, Tier: kvtier.Device,
		BlockHashes: make([]uint64, blocks), TokenIDs: make([]uint32, blocks*blockSize)}
	for i := range ev.BlockHashes {
		ev.BlockHashes[i] = rng.Uint64()
	}
	for i := range ev.TokenIDs {
		ev.TokenIDs[i] = rng.Uint32N(32000)
	}
	for _, tc := range []struct {
		name         string
		tokens, gzip bool
	}{{"tokens", true, false}, {"tokens+gzip", true, true}, {"hashes-only", false, false}, {"hashes-only+gzip", false, true}} {
		b.Run(tc.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				msg := &workerv1.SubscribeKvEventsResponse{Sequence: 1, Events: handler.Events([]kvevent.Event{ev}, tc.tokens)}
				buf, err := proto.Marshal(msg)
				if err != nil {
					b.Fatal(err)
				}
				if tc.gzip {
					buf = gzipRoundTrip(b, buf, &size)
				} else {
					size = len(buf)
				}
				var got workerv1.SubscribeKvEventsResponse
				if err := proto.Unmarshal(buf, &got); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size), "wire-B/op")
		})
	}
}

// gzipRoundTrip compresses buf, records the compressed size, and returns
// it decompressed.
func gzipRoundTrip(b *testing.B, buf []byte, size *int) []byte {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	if _, err := w.Write(buf); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	*size = z.Len()
	r, err := gzip.NewReader(&z)
	if err != nil {
		b.Fatal(err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		b.Fatal(err)
	}
	return out
}
