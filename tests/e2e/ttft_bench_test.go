package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
)

// BenchmarkAddedTTFT measures what the frontend and router add to time to
// first token: the same streams (sim executor, zero compute) go once
// straight to the worker's Generate and once through the frontend's
// /v1/completions (route, then Generate, then SSE), at 1, 64 and 256
// concurrent streams. It reports p50/p99 TTFT of both paths, their
// difference, and the tokens per second the frontend streamed (completion
// tokens from usage over the frontend waves' wall time).
func BenchmarkAddedTTFT(b *testing.B) {
	if testing.Short() {
		b.Skip("runs real processes")
	}
	m := StartMesh(b, 1, "round-robin", "-executor", "sim", "-sim-speedup", "0", "-sim-vocab", "512")
	worker := workerv1connect.NewWorkerServiceClient(h2cClient(), "http://"+m.Workers[0].Addr)
	prompt := make([]uint32, 64)
	for i := range prompt {
		prompt[i] = uint32(100 + i)
	}
	for _, streams := range []int{1, 64, 256} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			var direct, front []time.Duration
			var tokens atomic.Int64
			var frontTime time.Duration
			for range b.N {
				direct = append(direct, wave(b, streams, func(ctx context.Context) (time.Duration, int, error) {
					return directTTFT(ctx, worker, prompt)
				})...)
				start := time.Now()
				d := wave(b, streams, func(ctx context.Context) (time.Duration, int, error) {
					ttft, n, err := frontendTTFT(ctx, m, prompt)
					tokens.Add(int64(n))
					return ttft, n, err
				})
				frontTime += time.Since(start)
				front = append(front, d...)
			}
			report(b, "direct", direct)
			report(b, "frontend", front)
			b.ReportMetric(float64(pct(front, 99)-pct(direct, 99))/1e6, "added-p99-ms")
			b.ReportMetric(float64(pct(front, 50)-pct(direct, 50))/1e6, "added-p50-ms")
			b.ReportMetric(float64(tokens.Load())/frontTime.Seconds(), "frontend-tok/s")
		})
	}
}

const benchMaxTokens = 16

// h2cClient is deliberately not client.NewHTTP: a wave opens hundreds of
// concurrent streams, and the pool keeps up to 512 idle connections per host
// (the shared client keeps 16) so waves do not pay for new connections.
func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: p, MaxIdleConnsPerHost: 512}}
}

func wave(b *testing.B, n int, one func(context.Context) (time.Duration, int, error)) []time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := make([]time.Duration, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			d, _, err := one(ctx)
			if err != nil {
				errs <- err
			}
			out[i] = d
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return out
}

func directTTFT(ctx context.Context, c workerv1connect.WorkerServiceClient, prompt []uint32) (time.Duration, int, error) {
	start := time.Now()
	s, err := c.Generate(ctx, connect.NewRequest(&workerv1.GenerateRequest{
		RequestId: fmt.Sprint(time.Now().UnixNano()), Model: "sim", TokenIds: prompt,
		Stop: &commonv1.StopConditions{MaxTokens: benchMaxTokens, IgnoreEos: true},
	}))
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	var ttft time.Duration
	n := 0
	for s.Receive() {
		if ttft == 0 && len(s.Msg().GetTokenIds()) > 0 {
			ttft = time.Since(start)
		}
		n += len(s.Msg().GetTokenIds())
	}
	return ttft, n, s.Err()
}

var benchHTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}

func frontendTTFT(ctx context.Context, m *Mesh, prompt []uint32) (time.Duration, int, error) {
	body, _ := json.Marshal(map[string]any{"model": "sim", "prompt": prompt, "max_tokens": benchMaxTokens,
		"stream": true, "ignore_eos": true, "stream_options": map[string]any{"include_usage": true}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.URL()+"completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	res, err := benchHTTP.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("frontend: %s", res.Status)
	}
	var ttft time.Duration
	n := 0
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: {") {
			continue
		}
		var chunk struct {
			Choices []struct{ Text string } `json:"choices"`
			Usage   *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(line[len("data: "):]), &chunk); err != nil {
			return 0, 0, err
		}
		if ttft == 0 && len(chunk.Choices) > 0 {
			ttft = time.Since(start)
		}
		if chunk.Usage != nil {
			n = chunk.Usage.CompletionTokens
		}
	}
	return ttft, n, sc.Err()
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func report(b *testing.B, name string, ds []time.Duration) {
	b.ReportMetric(float64(pct(ds, 50))/1e6, name+"-p50-ms")
	b.ReportMetric(float64(pct(ds, 99))/1e6, name+"-p99-ms")
}
