// Command routesim replays a Mooncake trace through simulated workers on a
// virtual clock, routed by the router's own decision code, and prints each
// mode's time to first token and prefix hit ratio: a whole trace in seconds
// where a live `make bench` takes half an hour. See
// services/router/internal/routesim for what it models and leaves out.
//
//	go run ./services/router/cmd/routesim -trace ../shared/traces/conversation_trace.jsonl
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"switchyard.dev/libs/trace"
	"switchyard.dev/services/router/internal/policy"
	"switchyard.dev/services/router/internal/routesim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "routesim:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("routesim", flag.ContinueOnError)
	var (
		cfg    routesim.Config
		rp     = routesim.Replay{Synth: trace.Synth{Vocab: 32000, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 512, Seed: 1}}
		params = policy.DefaultParams()
	)
	path := fs.String("trace", "", "Mooncake trace (JSON lines); required")
	limit := fs.Int("limit", 0, "replay only the first this many records (0: all)")
	modes := fs.String("modes", "kv,round-robin", "router modes to replay, comma-separated; the first is the baseline of the ratio column")
	fs.IntVar(&cfg.Workers, "workers", 8, "simulated workers")
	fs.IntVar(&cfg.NumBlocks, "num-blocks", 131072, "KV blocks per worker")
	fs.IntVar(&cfg.BlockSize, "block-size", 16, "tokens per KV block")
	fs.IntVar(&cfg.MaxBatchTokens, "max-batch-tokens", 512, "token budget of a worker step")
	fs.StringVar(&cfg.PrefillOrder, "prefill-order", "fcfs", "workers' prefill order: fcfs or shortest")
	fs.IntVar(&cfg.LongPrefillTokens, "long-prefill-tokens", 0, "workers: while several prompts prefill, at most this many tokens of each per step (0: off)")
	fs.IntVar(&cfg.ExpectedOutputTokens, "expected-output-tokens", 256, "decode length the router assumes")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the router's tie-breaks")
	fs.Float64Var(&params.PrefillLoadScale, "prefill-load-scale", params.PrefillLoadScale, "router: weight of a block to prefill against a block held by a decode")
	fs.Float64Var(&params.OwnPrefillWeight, "own-prefill-weight", params.OwnPrefillWeight, "router: weight of the request's own uncached blocks against queued ones")
	fs.Float64Var(&params.Temperature, "temperature", 0, "router: softmax temperature (0: lowest cost)")
	fs.Float64Var(&rp.Rate, "rate", 1, "arrival rate against the trace's own (1.1: a tenth more load)")
	fs.IntVar(&rp.MaxInputTokens, "max-input-tokens", 129024, "truncate prompts to this many tokens, as make bench does (0: no cap)")
	fs.IntVar(&rp.MaxOutputTokens, "max-output-tokens", 2048, "cap generations, as make bench does (0: no cap)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" || fs.NArg() > 0 {
		return errors.New("want -trace FILE and no arguments")
	}
	cfg.Params = params
	recs, err := trace.ReadFile(*path, rp.Synth.BlockTokens, *limit)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "mode\tmean TTFT ms\tp50\tp90\tp99\thit ratio\tfailed\tpreempted\tratio to %s\t\n", strings.Split(*modes, ",")[0])
	var base time.Duration
	for i, mode := range strings.Split(*modes, ",") {
		reqs, err := rp.Requests(recs)
		if err != nil {
			return err
		}
		c := cfg
		c.Mode = mode
		res, err := routesim.Run(ctx, c, reqs)
		if err != nil {
			return fmt.Errorf("mode %s: %w", mode, err)
		}
		ts, mean := res.TTFTs(), res.MeanTTFT()
		if i == 0 {
			base = mean
		}
		ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f%%\t%d\t%d\t%.2fx\t\n", mode, ms(mean),
			ms(routesim.Quantile(ts, 0.5)), ms(routesim.Quantile(ts, 0.9)), ms(routesim.Quantile(ts, 0.99)),
			100*res.HitRatio(), res.Failed, res.Preemptions, float64(mean)/float64(max(base, 1)))
	}
	return tw.Flush()
}
