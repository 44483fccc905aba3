package worker_test

import (
	"context"
	"errors"
	"io"
	"testing"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/sim"
)

const benchTokens = 256

// BenchmarkGenerate compares a Generate RPC (Connect over h2c on
// loopback, full server interceptor chain) with direct engine use, both on
// a simulator whose steps take no time, so the difference is the RPC's
// cost per token.
func BenchmarkGenerate(b *testing.B) {
	prompt := []uint32{1, 40, 41, 42, 43, 44, 45, 46}
	b.Run("rpc", func(b *testing.B) {
		w := start(b, "decode", "-executor", "sim", "-sim-speedup", "0", "-log-level", "error")
		r := req("sim", prompt, benchTokens)
		msgs := 0
		b.ResetTimer()
		for b.Loop() {
			st, err := w.client.Generate(context.Background(), r)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for st.Receive() {
				n += len(st.Msg().GetTokenIds())
				msgs++
			}
			if err := st.Err(); err != nil || n != benchTokens {
				b.Fatalf("%d tokens, err %v", n, err)
			}
			st.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchTokens), "ns/token")
		// Outputs queued while a message is sent are coalesced into the next.
		b.ReportMetric(float64(msgs)/float64(b.N), "msgs/op")
	})
	b.Run("direct", func(b *testing.B) {
		exec, err := sim.New(sim.Config{})
		if err != nil {
			b.Fatal(err)
		}
		eng, err := engine.New(engine.Config{}, exec, nil)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = eng.Run(ctx) }()
		defer func() { cancel(); <-done; _ = eng.Close() }()
		b.ResetTimer()
		for b.Loop() {
			st, err := eng.Submit(ctx, engine.Request{Prompt: prompt, Stop: engine.StopParams{MaxTokens: benchTokens}})
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for {
				o, err := st.Recv(ctx)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					b.Fatal(err)
				}
				n += len(o.TokenIDs)
			}
			if n != benchTokens {
				b.Fatalf("%d tokens", n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchTokens), "ns/token")
	})
}
