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
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mooncake"
	"switchyard.dev/services/router/internal/policy"
	"switchyard.dev/services/router/internal/routesim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "routesim:", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("routesim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg    routesim.Config
		rp     = mooncake.Replay{Synth: mooncake.Synth{Vocab: 32000, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 512, Seed: 1}}
		params = policy.DefaultParams()
	)
	path := fs.String("trace", "", "Mooncake trace (JSON lines); required")
	limit := fs.Int("limit", 0, "replay only the first this many records (0: all)")
	modeList := fs.String("modes", "kv,round-robin", "router modes to replay, comma-separated; the ratio column divides by the first")
	fs.IntVar(&cfg.Workers, "workers", 8, "simulated workers")
	fs.IntVar(&cfg.ContextLen, "context", 131072, "simulated model context in tokens (make bench's SIM_CONTEXT)")
	fs.IntVar(&cfg.Engine.NumBlocks, "num-blocks", 0, "KV blocks per worker (0: room for 16 full contexts)")
	fs.IntVar(&cfg.Engine.BlockSize, "block-size", 16, "tokens per KV block")
	fs.IntVar(&cfg.Engine.MaxBatchTokens, "max-batch-tokens", 512, "token budget of a worker step")
	fs.StringVar(&cfg.Engine.PrefillOrder, "prefill-order", "fcfs", "workers' prefill order: fcfs or shortest")
	fs.IntVar(&cfg.Engine.LongPrefillTokens, "long-prefill-tokens", 0, "workers: while several prompts prefill, at most this many tokens of each per step (0: off)")
	fs.IntVar(&cfg.ExpectedOutputTokens, "expected-output-tokens", 256, "decode length the router assumes")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed of the router's tie-breaks")
	fs.Float64Var(&params.PrefillLoadScale, "prefill-load-scale", params.PrefillLoadScale, "router: weight of a block to prefill against a block held by a decode")
	fs.Float64Var(&params.OwnPrefillWeight, "own-prefill-weight", params.OwnPrefillWeight, "router: weight of the request's own uncached blocks against queued ones")
	fs.Float64Var(&params.Temperature, "temperature", 0, "router: softmax temperature (0: lowest cost)")
	fs.Float64Var(&params.PrefixPullWeight, "prefix-pull-weight", params.PrefixPullWeight, "router: credit of a block a worker would copy from a peer (prefix pull; 0: off)")
	fs.DurationVar(&cfg.PullBlockTime, "pull-block-time", 84*time.Microsecond, "workers: time to copy one KV block from a peer")
	fs.Float64Var(&rp.Speed, "rate", 1, "arrival rate against the trace's own (1.1: a tenth more load)")
	fs.IntVar(&rp.MaxInputTokens, "max-input-tokens", 0, "truncate prompts to this many tokens (0: context - 2048, as make bench does)")
	fs.IntVar(&rp.MaxOutputTokens, "max-output-tokens", 2048, "cap generations, as make bench does (0: no cap)")
	hostBlocks := fs.Int("host-blocks", 0, "workers: KV blocks in a host-memory tier below the pool (0: none)")
	diskBlocks := fs.Int("disk-blocks", 0, "workers: KV blocks in a disk tier below the pool (0: none)")
	sharedBlocks := fs.Int("shared-blocks", 0, "KV blocks in one object-store tier shared by every worker (0: none)")
	fs.BoolVar(&cfg.FixedTierWeights, "fixed-tier-weights", false, "router: credit lower-tier blocks with the fixed default weights instead of deriving them from load against recompute time")
	fs.BoolVar(&cfg.NoReplan, "no-replan", false, "workers: plan onboarding from lower tiers only when a request arrives, not again when it reaches admission")
	profile := fs.String("tier-profile", "h100", "load times of the tiers: h100 (host 25 GB/s, NVMe 6 GB/s, 2 MiB blocks) or local (this project's test machine, measured)")
	csvPath := fs.String("csv", "", "also write every request's outcome, mode by mode, to this CSV file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" || fs.NArg() > 0 {
		return errors.New("want -trace FILE and no arguments")
	}
	modes, err := parseModes(*modeList)
	if err != nil {
		return err
	}
	if rp.MaxInputTokens == 0 {
		rp.MaxInputTokens = max(cfg.ContextLen-2048, 1)
	}
	cfg.Params = params
	if cfg.Tiers, err = tiers(*hostBlocks, *diskBlocks, *sharedBlocks, *profile); err != nil {
		return err
	}
	if err := rp.Validate(); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	recs, err := mooncake.ReadFile(*path, rp.Synth.BlockTokens, *limit)
	if err != nil {
		return err
	}
	var (
		rows    *csv.Writer
		csvFile *os.File
	)
	if *csvPath != "" {
		if csvFile, err = os.Create(*csvPath); err != nil {
			return err
		}
		defer csvFile.Close() // on early returns; closed and checked below
		rows = csv.NewWriter(csvFile)
		_ = rows.Write([]string{"mode", "request", "worker", "ttft_ms", "prompt_tokens", "cached_tokens", "queue_ms", "pulled_blocks"})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "mode\tmean TTFT ms\tp50\tp90\tp99\tmean queue ms\thit ratio\tpulls (blocks)\tonboarded host/disk/shared\tfailed\tpreempted\tmean ÷ %s's\t\n", modes[0])
	reqs, err := routesim.Requests(recs, rp) // replayable: each mode ranges over it anew
	if err != nil {
		return err
	}
	var base time.Duration
	for i, mode := range modes {
		c := cfg
		c.Mode = mode
		res, err := routesim.Run(ctx, c, reqs)
		if err != nil {
			return fmt.Errorf("mode %s: %w", mode, err)
		}
		if rows != nil {
			writeOutcomes(rows, mode, res)
		}
		ts, mean := res.TTFTs(), res.MeanTTFT()
		if i == 0 {
			base = mean
		}
		ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.2f%%\t%d (%d)\t%d/%d/%d\t%d\t%d\t%.2fx\t\n", mode, ms(mean),
			ms(routesim.Quantile(ts, 0.5)), ms(routesim.Quantile(ts, 0.9)), ms(routesim.Quantile(ts, 0.99)), ms(res.MeanQueue()),
			100*res.HitRatio(), res.Pulls, res.PulledBlocks, res.Onboarded[kvtier.Host], res.Onboarded[kvtier.Disk], res.Onboarded[kvtier.External],
			res.Failed, res.Preemptions, float64(mean)/float64(max(base, 1)))
	}
	if rows != nil {
		rows.Flush()
		if err := errors.Join(rows.Error(), csvFile.Close()); err != nil {
			return fmt.Errorf("-csv %s: %w", *csvPath, err)
		}
	}
	return tw.Flush()
}

// writeOutcomes adds one CSV row per request of res (ttft_ms empty for a
// failed request); errors surface at the writer's Flush.
func writeOutcomes(w *csv.Writer, mode string, res *routesim.Result) {
	ms := func(d time.Duration) string {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64)
	}
	for i, o := range res.Requests {
		ttft := ""
		if !o.Failed() {
			ttft = ms(o.TTFT)
		}
		_ = w.Write([]string{mode, strconv.Itoa(i), strconv.Itoa(o.Worker), ttft,
			strconv.Itoa(o.PromptTokens), strconv.Itoa(o.CachedTokens), ms(o.Queue), strconv.Itoa(o.PulledBlocks)})
	}
}

// parseModes splits a comma-separated mode list and checks every name
// before anything runs (a whole trace takes seconds per mode).
func parseModes(list string) ([]string, error) {
	known := policy.NewRegistry().Modes()
	var modes []string
	for m := range strings.SplitSeq(list, ",") {
		m = strings.TrimSpace(m)
		switch {
		case m == "":
			return nil, fmt.Errorf("-modes %q: empty mode name", list)
		case m == policy.ModeDirect || !slices.Contains(known, m):
			return nil, fmt.Errorf("-modes %q: unknown mode %q (want %s)", list, m, strings.Join(slices.DeleteFunc(known, func(k string) bool { return k == policy.ModeDirect }), ", "))
		}
		modes = append(modes, m)
	}
	return modes, nil
}

// tiers builds the workers' lower tiers from the flags.
func tiers(host, disk, shared int, profile string) ([]routesim.TierConfig, error) {
	var times map[kvtier.Tier]time.Duration
	switch profile {
	case "h100":
		times = routesim.ProfileH100
	case "local":
		times = routesim.ProfileLocal
	default:
		return nil, fmt.Errorf("-tier-profile=%q: want h100 or local", profile)
	}
	if host < 0 || disk < 0 || shared < 0 {
		return nil, fmt.Errorf("-host-blocks=%d -disk-blocks=%d -shared-blocks=%d: must not be negative", host, disk, shared)
	}
	var out []routesim.TierConfig
	if host > 0 {
		out = append(out, routesim.TierConfig{Tier: kvtier.Host, Blocks: host, BlockTime: times[kvtier.Host]})
	}
	if disk > 0 {
		out = append(out, routesim.TierConfig{Tier: kvtier.Disk, Blocks: disk, BlockTime: times[kvtier.Disk]})
	}
	if shared > 0 {
		out = append(out, routesim.TierConfig{Tier: kvtier.External, Blocks: shared, BlockTime: times[kvtier.External], Shared: true})
	}
	return out, nil
}
