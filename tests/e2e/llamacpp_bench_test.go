package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/mesh/deptest"
)

const (
	lcPromptTokens = 64
	lcMaxTokens    = 64
)

// BenchmarkLlamaCppWorkerOverhead measures what a llama.cpp worker adds to
// llama-server: the same streams (64-token prompts of random ids, 64
// greedy tokens each, every prompt new so each is prefilled) go once to
// llama-server's /completion directly and once through the worker's
// Generate, at 1 and 16 concurrent streams. It reports p50/p99 time to
// first token of both paths, their difference, and the tokens per second
// each delivered (tokens over the wave's wall time).
func BenchmarkLlamaCppWorkerOverhead(b *testing.B) {
	if testing.Short() {
		b.Skip("runs real processes")
	}
	model, tok := llamaModel(b)
	srv := deptest.StartLlamaServer(b, model, "--parallel", "16", "--ctx-size", "8192", "--no-kv-unified", "--cache-ram", "0", "--alias", "stories260K", "--threads", "2")
	bin := Build(b)
	w := Start(b, bin, "decode", fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(b)), "-discovery", "none",
		"-engine", "llamacpp", "-engine-url", srv.URL, "-tokenizer", tok, "-model-name", "stories260K")
	worker := workerv1connect.NewWorkerServiceClient(h2cClient(), "http://"+w.Addr)
	rng := rand.New(rand.NewPCG(7, 7))
	prompt := func() []uint32 {
		p := make([]uint32, lcPromptTokens)
		p[0] = 1
		for i := 1; i < len(p); i++ {
			p[i] = uint32(259 + rng.IntN(253))
		}
		return p
	}
	var mu sync.Mutex
	next := func() []uint32 { mu.Lock(); defer mu.Unlock(); return prompt() }
	for _, streams := range []int{1, 16} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			var direct, via []time.Duration
			var directTok, viaTok atomic.Int64
			var directTime, viaTime time.Duration
			for range b.N {
				start := time.Now()
				direct = append(direct, wave(b, streams, func(ctx context.Context) (time.Duration, int, error) {
					d, n, err := llamaServerTTFT(ctx, srv.URL, next())
					directTok.Add(int64(n))
					return d, n, err
				})...)
				directTime += time.Since(start)
				start = time.Now()
				via = append(via, wave(b, streams, func(ctx context.Context) (time.Duration, int, error) {
					d, n, err := workerTTFT(ctx, worker, next())
					viaTok.Add(int64(n))
					return d, n, err
				})...)
				viaTime += time.Since(start)
			}
			report(b, "direct", direct)
			report(b, "worker", via)
			b.ReportMetric(float64(pct(via, 50)-pct(direct, 50))/1e6, "added-p50-ms")
			b.ReportMetric(float64(directTok.Load())/directTime.Seconds(), "direct-tok/s")
			b.ReportMetric(float64(viaTok.Load())/viaTime.Seconds(), "worker-tok/s")
		})
	}
}

// llamaServerTTFT streams one greedy /completion straight from llama-server.
func llamaServerTTFT(ctx context.Context, url string, prompt []uint32) (time.Duration, int, error) {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": lcMaxTokens, "stream": true, "return_tokens": true,
		"temperature": 0, "ignore_eos": true, "cache_prompt": true})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/completion", bytes.NewReader(body))
	start := time.Now()
	res, err := benchHTTP.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer res.Body.Close()
	var ttft time.Duration
	n := 0
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var c struct {
			Tokens []uint32 `json:"tokens"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			return 0, 0, err
		}
		if ttft == 0 && len(c.Tokens) > 0 {
			ttft = time.Since(start)
		}
		n += len(c.Tokens)
	}
	return ttft, n, sc.Err()
}

// workerTTFT streams one greedy Generate from the worker.
func workerTTFT(ctx context.Context, c workerv1connect.WorkerServiceClient, prompt []uint32) (time.Duration, int, error) {
	start := time.Now()
	s, err := c.Generate(ctx, connect.NewRequest(&workerv1.GenerateRequest{
		RequestId: fmt.Sprint(time.Now().UnixNano()), Model: "stories260K", TokenIds: prompt,
		Stop: &commonv1.StopConditions{MaxTokens: lcMaxTokens, IgnoreEos: true},
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

// BenchmarkLlamaCppHitRatio compares the router's prefix-aware routing
// over two llama.cpp workers fed by the KV events the workers synthesize
// from their slots, against the router's approximate mode (the workers
// publish no events; the router assumes what it routed stays cached). The
// workload is shared-prefix: "system prompts" of ~280 tokens, each
// followed by a new question, 60 requests in a fixed random order, a few
// at a time, with more prefixes than the fleet has slots, so which prefix
// is still cached where matters. It reports the engines' own hit ratio
// (cached over prompt tokens, from usage) and the router's belief
// (matched over requested blocks).
func BenchmarkLlamaCppHitRatio(b *testing.B) {
	if testing.Short() {
		b.Skip("runs real processes")
	}
	for _, load := range []struct{ slots, prefixes, concurrency int }{{2, 6, 1}, {2, 6, 2}, {4, 12, 4}} {
		for _, mode := range []struct{ name, events string }{{"events", ""}, {"approximate", "none"}} {
			name := fmt.Sprintf("slots=%d/prefixes=%d/concurrency=%d/%s", load.slots, load.prefixes, load.concurrency, mode.name)
			b.Run(name, func(b *testing.B) {
				w := llamaWorker(b, load.slots)
				if mode.events != "" {
					w = append(w, "-engine-kv-events", mode.events)
				}
				m := startFleet(b, "kv", w, w)
				c := openai.NewClient(option.WithBaseURL(m.URL()), option.WithAPIKey("unused"), option.WithMaxRetries(0))
				id := waitModelB(b, c)
				var prompt, cached int64
				for range b.N {
					p, k := sharedPrefixWorkload(b, c, id, load.prefixes, load.concurrency)
					prompt += p
					cached += k
				}
				b.ReportMetric(float64(cached)/float64(prompt), "engine-hit-ratio")
				b.ReportMetric(promSum(b, "http://"+m.Router.Addr+"/metrics", "switchyard_router_hit_ratio_sum", "")/
					promSum(b, "http://"+m.Router.Addr+"/metrics", "switchyard_router_hit_ratio_count", ""), "router-hit-ratio")
			})
		}
	}
}

func waitModelB(b *testing.B, c openai.Client) string {
	b.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		page, err := c.Models.List(context.Background())
		if err == nil && len(page.Data) > 0 {
			return page.Data[0].ID
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.Fatal("no model listed within 60s")
	return ""
}

// systemPrompt is the i-th shared prefix: a sentence built from names
// and things, repeated to ~280 tokens.
func systemPrompt(i int) string {
	names := []string{"Lily", "Tom", "Sue", "Ben", "Mia", "Max"}
	things := []string{"a red ball", "a big box", "a small cat", "a sweet cake", "a tall tree", "a blue boat"}
	s := fmt.Sprintf("Once upon a time, %s found %s in the park. It was the best day. ", names[i%len(names)], things[i/len(names)%len(things)])
	return strings.Repeat(s, 16)
}

// sharedPrefixWorkload sends 60 requests over prefixes system prompts,
// concurrency at a time, and returns the prompt and cached tokens the
// engines reported.
func sharedPrefixWorkload(b *testing.B, c openai.Client, model string, prefixes, concurrency int) (prompt, cached int64) {
	rng := rand.New(rand.NewPCG(3, 4))
	order := make([]int, 60)
	for i := range order {
		order[i] = rng.IntN(prefixes)
	}
	var p, k atomic.Int64
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range concurrency {
		wg.Go(func() {
			for i := range jobs {
				text := systemPrompt(order[i]) + fmt.Sprintf("Question %d: what happened next?", i)
				comp, err := c.Completions.New(context.Background(), openai.CompletionNewParams{
					Model:  openai.CompletionNewParamsModel(model),
					Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(text)}, MaxTokens: openai.Int(8), Temperature: openai.Float(0),
				})
				if err != nil {
					b.Error(err)
					continue
				}
				p.Add(comp.Usage.PromptTokens)
				k.Add(comp.Usage.PromptTokensDetails.CachedTokens)
			}
		})
	}
	for i := range order {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return p.Load(), k.Load()
}
