// Command plansim replays a Mooncake trace on a virtual clock through the
// planner's own decisions over simulated engines (internal/plansim), or
// through static pools, and reports SLA violations against replica-seconds
// side by side: a whole trace in seconds of CPU.
//
//	plansim -trace ../shared/traces/conversation_trace.jsonl \
//	  -rate-profile 'sin:20m,1,3*step:40m,3' -static 4,6,8 -planner
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"switchyard.dev/libs/engine/sim"
	"switchyard.dev/libs/mooncake"

	"switchyard.dev/services/planner/internal/plansim"
	"switchyard.dev/services/planner/internal/policy"
	"switchyard.dev/services/planner/internal/predict"
	"switchyard.dev/services/planner/internal/profile"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "plansim:", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("plansim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg = plansim.Config{Policy: policy.DefaultConfig()}
		rp  = mooncake.Replay{Synth: mooncake.Synth{Vocab: 32000, TokenMin: 3, BlockTokens: 512, ReplayBlockTokens: 512, Seed: 1}}
	)
	cfg.Policy.Disaggregated = false
	path := fs.String("trace", "", "Mooncake trace (JSON lines); required")
	limit := fs.Int("limit", 0, "replay only the first this many records (0: all)")
	fs.Float64Var(&rp.Speed, "rate", 1, "arrival rate against the trace's own")
	rateProfile := fs.String("rate-profile", "", "multiply the arrival rate over time (loadtest's -rate-profile syntax), e.g. 'sin:20m,1,3*step:40m,3'")
	fs.IntVar(&rp.Synth.ReplayBlockTokens, "trace-block-tokens", 512, "tokens each trace hash id expands to (loadtest's -trace-block-tokens); smaller scales input lengths down")
	fs.IntVar(&rp.MaxInputTokens, "max-input-tokens", 0, "truncate prompts to this many tokens (0: context - 2048)")
	fs.IntVar(&rp.MaxOutputTokens, "max-output-tokens", 2048, "cap generations")
	fs.IntVar(&cfg.ContextLen, "context", 131072, "simulated model context in tokens")
	fs.IntVar(&cfg.Engine.NumBlocks, "num-blocks", 0, "KV blocks per replica (0: room for 16 full contexts)")
	fs.IntVar(&cfg.Engine.BlockSize, "block-size", 16, "tokens per KV block")
	fs.IntVar(&cfg.Engine.MaxBatchTokens, "max-batch-tokens", 512, "token budget of a replica's step")
	statics := fs.String("static", "", "static pool sizes to replay, comma-separated (e.g. 4,6,8)")
	withPlanner := fs.Bool("planner", true, "replay the planner too")
	profilePath := fs.String("profile", "", "the planner's profile (planner profile's output); empty: measure the simulated replica now")
	writeProfile := fs.String("write-profile", "", "also write the measured profile here")
	fs.DurationVar(&cfg.Policy.TTFT, "ttft-target", 1500*time.Millisecond, "planner: TTFT target (the p90 it plans for)")
	fs.DurationVar(&cfg.Policy.ITL, "itl-target", 40*time.Millisecond, "planner: ITL target (the p90 it plans for)")
	fs.DurationVar(&cfg.SLATTFT, "sla-ttft", 4*time.Second, "a request over this TTFT violates the SLA")
	fs.DurationVar(&cfg.SLAITL, "sla-itl", 60*time.Millisecond, "a request over this mean ITL violates the SLA")
	fs.DurationVar(&cfg.Policy.Interval, "interval", cfg.Policy.Interval, "planner: interval")
	fs.IntVar(&cfg.Policy.Decode.Min, "min", 1, "planner: fewest replicas")
	fs.IntVar(&cfg.Policy.Decode.Max, "max", 16, "planner: most replicas")
	fs.IntVar(&cfg.Policy.Budget, "budget", 0, "planner: replica budget (0: max)")
	fs.IntVar(&cfg.Policy.MaxStepUp, "max-step-up", cfg.Policy.MaxStepUp, "planner: replicas added an interval at most")
	fs.IntVar(&cfg.Policy.DownStable, "down-stable", cfg.Policy.DownStable, "planner: intervals a lower desire must last")
	fs.DurationVar(&cfg.Policy.DownCooldown, "down-cooldown", cfg.Policy.DownCooldown, "planner: no scale-down this long after a scale-up")
	fs.Float64Var(&cfg.Policy.Slack, "slack", cfg.Policy.Slack, "planner: how far over target an observed p90 may be before the reactive rule adds a replica")
	fs.Float64Var(&cfg.Policy.DownMargin, "down-margin", cfg.Policy.DownMargin, "planner: headroom a scale-down must leave")
	fs.Float64Var(&cfg.Policy.CorrectionWeight, "correction-weight", cfg.Policy.CorrectionWeight, "planner: EWMA weight of a new observed/expected ratio")
	fs.Float64Var(&cfg.Policy.RateSpread, "rate-spread", cfg.Policy.RateSpread, "planner: standard errors of the rate forecast added as headroom for bursts")
	fs.StringVar(&cfg.Predictor, "predictor", predict.DefaultSpec, "planner: load predictor (constant, holt-winters[:alpha=..,beta=..], kalman)")
	fs.IntVar(&cfg.Initial, "initial", 0, "planner: replicas at the start (0: min)")
	fs.DurationVar(&cfg.StartupDelay, "startup-delay", 2*time.Second, "a new replica serves this long after the decision")
	every := fs.Duration("violations-every", 0, "also print each arm's violating requests per this much replay time (0: no)")
	jsonOut := fs.String("json", "", "write every arm's result (and the planner's timeline) as JSON here")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *path == "" || fs.NArg() > 0 {
		return errors.New("want -trace FILE and no arguments")
	}
	if rp.MaxInputTokens == 0 {
		rp.MaxInputTokens = max(cfg.ContextLen-2048, 1)
	}
	if *rateProfile != "" {
		p, err := mooncake.ParseRateProfile(*rateProfile)
		if err != nil {
			return fmt.Errorf("-rate-profile: %w", err)
		}
		rp.Rate = mooncake.NewWarper(p)
	}
	if err := rp.Validate(); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	var sizes []int
	for _, f := range strings.Split(*statics, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return fmt.Errorf("-static %q: want positive counts", *statics)
		}
		sizes = append(sizes, n)
	}
	if len(sizes) == 0 && !*withPlanner {
		return errors.New("nothing to replay: give -static sizes or -planner")
	}
	recs, err := mooncake.ReadFile(*path, rp.Synth.BlockTokens, *limit)
	if err != nil {
		return err
	}
	reqs := requests(recs, rp)
	if *withPlanner {
		if *profilePath != "" {
			if cfg.Profile, err = profile.Load(*profilePath, "sim"); err != nil {
				return err
			}
		} else {
			mc := cfg
			mc.Timing = sim.Polynomial{}
			if cfg.Profile, err = plansim.MeasureProfile(mc, []int{128, 512, 2048, 8192, 32768}, []int{1, 4, 16, 64, 128}, []int{1024, 8192, 32768}); err != nil {
				return err
			}
			if *writeProfile != "" {
				if err := cfg.Profile.Save(*writeProfile); err != nil {
					return err
				}
			}
		}
	}
	type arm struct {
		Name   string          `json:"name"`
		Result *plansim.Result `json:"result"`
	}
	var arms []arm
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "pool\trequests\tviolating\t%%\treplica-s\tmean replicas\tp50 TTFT ms\tp90\tp99\tp90 ITL ms\tups\tdowns\tturns\tbreach→serving p50 s\t\n")
	show := func(name string, res *plansim.Result) {
		ms := func(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d)/float64(time.Millisecond)) }
		b2s := "—"
		if len(res.BreachToServing) > 0 {
			b2s = fmt.Sprintf("%.1f", plansim.Quantile(res.BreachToServing, 0.5).Seconds())
		}
		mean := 0.0
		if res.End > 0 {
			mean = res.ReplicaSeconds / res.End.Seconds()
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.0f\t%.2f\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t\n", name, res.Requests, res.Violations,
			100*res.ViolationRate(), res.ReplicaSeconds, mean, ms(plansim.Quantile(res.TTFTs, 0.5)), ms(plansim.Quantile(res.TTFTs, 0.9)),
			ms(plansim.Quantile(res.TTFTs, 0.99)), ms(plansim.Quantile(res.ITLs, 0.9)), res.ScaleUps, res.ScaleDowns, res.DirectionChanges, b2s)
		_ = tw.Flush()
	}
	if *withPlanner {
		res, err := plansim.Run(ctx, cfg, reqs)
		if err != nil {
			return err
		}
		show("planner", res)
		violationHistogram(stdout, "planner", res, *every)
		arms = append(arms, arm{"planner", res})
	}
	for _, n := range sizes {
		c := cfg
		c.Static = n
		res, err := plansim.Run(ctx, c, reqs)
		if err != nil {
			return err
		}
		res.Timeline = nil
		show("static "+strconv.Itoa(n), res)
		violationHistogram(stdout, "static "+strconv.Itoa(n), res, *every)
		arms = append(arms, arm{"static " + strconv.Itoa(n), res})
	}
	if *jsonOut != "" {
		for _, a := range arms {
			a.Result.TTFTs, a.Result.ITLs = nil, nil // summarized above
		}
		b, err := json.MarshalIndent(arms, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(*jsonOut, b, 0o644)
	}
	return nil
}

// requests turns trace records into the replay's requests, each prompt
// synthesized when the replay reaches it.
func requests(recs []mooncake.Record, r mooncake.Replay) iter.Seq[plansim.Request] {
	return func(yield func(plansim.Request) bool) {
		var toks []int
		for _, rec := range recs {
			at := r.At(rec, recs[0])
			if at == mooncake.Never {
				return
			}
			toks = r.Prompt(toks[:0], rec)
			prompt := make([]uint32, len(toks))
			for i, t := range toks {
				prompt[i] = uint32(t)
			}
			if !yield(plansim.Request{Arrival: at, Prompt: prompt, Output: r.Output(rec)}) {
				return
			}
		}
	}
}
