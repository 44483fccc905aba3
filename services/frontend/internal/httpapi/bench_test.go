package httpapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/engine/tokenizer"
	"switchyard.dev/services/frontend/internal/upstream"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

// BenchmarkStream measures what the frontend adds to a streamed chat
// completion. The fake worker emits tokens instantly, so TTFT is the
// frontend's own path (decode, tokenize, route over loopback Connect, open
// the worker stream, first SSE chunk) and ns/token its per-token cost
// (receive, detokenize, encode and flush a chunk). Each iteration runs
// `streams` concurrent requests of 64 tokens; ttft-p50/p99 are over all
// requests of the run.
func BenchmarkStream(b *testing.B) {
	for _, streams := range []int{1, 64, 256} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			s := newStack(b, stackConfig{})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
			const tokens = 64
			body := chatBody(fmt.Sprintf(`"max_tokens":%d,"stream":true`, tokens))
			var mu sync.Mutex
			var ttfts []time.Duration
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				var wg sync.WaitGroup
				for range streams {
					wg.Go(func() {
						ttft, err := streamOnce(client, s.URL, body)
						if err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						ttfts = append(ttfts, ttft)
						mu.Unlock()
					})
				}
				wg.Wait()
			}
			elapsed := time.Since(start)
			b.StopTimer()
			if len(ttfts) == 0 {
				return
			}
			slices.Sort(ttfts)
			b.ReportMetric(float64(ttfts[len(ttfts)/2].Microseconds()), "ttft-p50-µs")
			b.ReportMetric(float64(ttfts[len(ttfts)*99/100].Microseconds()), "ttft-p99-µs")
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*streams*tokens), "ns/token")
		})
	}
}

// streamOnce runs one streamed request and returns its time to the first
// content chunk.
func streamOnce(client *http.Client, base, body string) (time.Duration, error) {
	start := time.Now()
	resp, err := client.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	var ttft time.Duration
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if ttft == 0 && strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`) {
			ttft = time.Since(start)
		}
		if line == "data: [DONE]" {
			return ttft, nil
		}
	}
	return ttft, fmt.Errorf("stream ended without [DONE]: %w", sc.Err())
}

// BenchmarkStreamCPU prices a streamed token in CPU, through the frontend
// and, in the same run, read straight off the worker's Connect stream.
// Each iteration runs `streams` concurrent requests of streamTokens
// tokens both ways; everything (fake worker, router, frontend, clients)
// is in this process, so the difference of the two is what the frontend
// adds: frontend-cpu-ns/token, and its inverse, tokens/frontend-core-s
// (streamed tokens a second one core of frontend sustains). The client
// only counts the SSE bytes, so the difference is not inflated by
// parsing them.
func BenchmarkStreamCPU(b *testing.B) {
	for _, streams := range []int{1, 64, 256} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			s := newStack(b, stackConfig{})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
			worker := upstream.NewWorkers(upstream.NewHTTPClient()).Worker(s.Workers[0].URL)
			body := chatBody(fmt.Sprintf(`"max_tokens":%d,"stream":true`, streamTokens))
			tok, err := tokenizer.NewBytes(upstreamtest.VocabSize)
			if err != nil {
				b.Fatal(err)
			}
			prompt := tok.Encode("User: Hi\nAssistant:", true, false)
			round := func(one func() error) time.Duration {
				start := cpuTime()
				var wg sync.WaitGroup
				for range streams {
					wg.Go(func() {
						if err := one(); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
				return cpuTime() - start
			}
			var direct, through time.Duration
			b.ResetTimer()
			for range b.N {
				direct += round(func() error { return workerStream(b.Context(), worker, prompt) })
				through += round(func() error { return sseStream(client, s.URL, body) })
			}
			b.StopTimer()
			tokens := float64(b.N * streams * streamTokens)
			added := float64((through - direct).Nanoseconds()) / tokens
			b.ReportMetric(float64(direct.Nanoseconds())/tokens, "worker-cpu-ns/token")
			b.ReportMetric(float64(through.Nanoseconds())/tokens, "total-cpu-ns/token")
			b.ReportMetric(added, "frontend-cpu-ns/token")
			if added > 0 {
				b.ReportMetric(1e9/added, "tokens/frontend-core-s")
			}
		})
	}
}

// streamTokens is the length of BenchmarkStreamCPU's streams: long enough
// that the per-token cost, not the request's, dominates.
const streamTokens = 256

// cpuTime is the CPU this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// workerStream reads one generation straight off the worker.
func workerStream(ctx context.Context, w workerv1connect.WorkerServiceClient, prompt []uint32) error {
	st, err := w.Generate(ctx, connect.NewRequest(&workerv1.GenerateRequest{Model: "tiny", TokenIds: prompt,
		Stop: &commonv1.StopConditions{MaxTokens: streamTokens}}))
	if err != nil {
		return err
	}
	defer st.Close()
	n := 0
	for st.Receive() {
		n += len(st.Msg().GetTokenIds())
	}
	if n != streamTokens {
		return fmt.Errorf("worker stream: %d tokens: %w", n, st.Err())
	}
	return st.Err()
}

// sseStream reads one streamed chat completion through the frontend,
// checking only that it ends with [DONE].
func sseStream(client *http.Client, base, body string) error {
	resp, err := client.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	const done = "data: [DONE]\n\n"
	buf := make([]byte, 32<<10)
	var tail []byte
	for {
		n, err := resp.Body.Read(buf)
		tail = append(tail, buf[:n]...)
		tail = tail[max(len(tail)-len(done), 0):]
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if string(tail) != done {
		return fmt.Errorf("stream ended with %q", tail)
	}
	return nil
}
