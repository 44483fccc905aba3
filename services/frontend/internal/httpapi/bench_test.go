package httpapi

import (
	"bufio"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
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
