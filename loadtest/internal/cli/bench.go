package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"switchyard.dev/libs/mooncake"
	"switchyard.dev/loadtest/internal/arrival"
	"switchyard.dev/loadtest/internal/metrics"
	"switchyard.dev/loadtest/internal/openai"
	"switchyard.dev/loadtest/internal/plots"
	"switchyard.dev/loadtest/internal/progress"
	"switchyard.dev/loadtest/internal/report"
	"switchyard.dev/loadtest/internal/runner"
	"switchyard.dev/loadtest/internal/workload"
)

// bench runs one benchmark and writes its output folder.
func bench(ctx context.Context, cfg *Config, argv []string, stdout, stderr io.Writer, log *slog.Logger) int {
	// Everything that can be checked offline is checked before the first
	// byte goes to the server: flags, the whole trace, the output folder.
	src, err := newSource(cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return ExitUsage
	}
	style, err := progress.ParseStyle(cfg.Progress, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return ExitUsage
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		fmt.Fprintf(stderr, "loadtest: output folder: %v\n", err)
		return ExitFailure
	}
	client, err := openai.New(openai.Config{
		BaseURL: cfg.URL, APIKey: cfg.apiKey, Model: cfg.Model,
		Mode: openai.Mode(cfg.Endpoint), ExtraBody: cfg.ExtraBody,
	}, openai.NewHTTPClient(max(cfg.Concurrency, 256), cfg.Timeout))
	if err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return ExitUsage
	}
	if cfg.Model == "" {
		ids, err := client.Models(ctx)
		if err != nil {
			fmt.Fprintf(stderr, "loadtest: no --model given and the server's model list is unavailable: %v\n", err)
			return ExitFailure
		}
		cfg.Model = ids[0]
		client.SetModel(cfg.Model)
		log.Info("model from /v1/models", "model", cfg.Model, "served", len(ids))
	}
	log.Info("starting", "url", cfg.URL, "model", cfg.Model, "endpoint", cfg.Endpoint, "workload", workloadName(cfg), "out", cfg.Out)

	run := runner.New(runner.Config{
		Concurrency: cfg.Concurrency, MaxRequests: cfg.MaxRequests, Duration: cfg.Duration, Grace: cfg.Grace,
	}, client)
	started := time.Now()
	res := withProgress(ctx, cfg, style, src, stderr, run)
	finished := time.Now()

	agg := metrics.Aggregate(res.Records, res.Elapsed, metrics.SLA{TTFT: cfg.SLATTFT, ITL: cfg.SLAITL, E2E: cfg.SLAE2E})
	if err := writeOutputs(cfg, argv, res, agg, started, finished); err != nil {
		fmt.Fprintf(stderr, "loadtest: %v\n", err)
		return ExitFailure
	}
	report.WriteText(stdout, agg)
	return verdict(res, agg, cfg.Out, stderr, log)
}

func withProgress(ctx context.Context, cfg *Config, style progress.Style, src workload.Source, stderr io.Writer, run *runner.Runner) runner.Result {
	total := cfg.MaxRequests
	if n := src.Len(); n >= 0 && (total == 0 || n < total) {
		total = n
	}
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() {
		progress.Reporter{W: stderr, Style: style, Total: total, Duration: cfg.Duration, Interval: cfg.ProgressInterval}.
			Run(pctx, run.Stats)
	})
	res := run.Run(ctx, src)
	stop()
	wg.Wait()
	return res
}

func writeOutputs(cfg *Config, argv []string, res runner.Result, agg metrics.Aggregates, started, finished time.Time) error {
	sum, err := report.NewSummary(argv, cfg.Settings())
	if err != nil {
		return err
	}
	sum.Model, sum.URL = cfg.Model, cfg.URL
	sum.StartedAt, sum.FinishedAt = started.UTC(), finished.UTC()
	sum.Interrupted = res.Interrupted
	if cfg.RateProfile != "" {
		sum.RateProfile = cfg.profile.String()
	}
	sum.Results = agg
	if err := report.WriteCSVFile(cfg.Out, res.Records); err != nil {
		return err
	}
	if cfg.Plots {
		if err := plots.WriteAll(cfg.Out, res.Records); err != nil {
			return err
		}
	}
	// The summary goes last: its presence marks a complete output folder.
	return report.WriteSummary(cfg.Out, sum)
}

func verdict(res runner.Result, agg metrics.Aggregates, out string, stderr io.Writer, log *slog.Logger) int {
	switch {
	case res.Interrupted:
		log.Warn("interrupted: partial results written", "out", out, "requests", agg.Total)
		return ExitInterrupted
	case agg.Total == 0:
		fmt.Fprintln(stderr, "loadtest: no requests were sent")
		return ExitFailure
	case agg.Succeeded == 0:
		first := "canceled"
		if len(agg.Errors) > 0 {
			first = agg.Errors[0].Message
		}
		fmt.Fprintf(stderr, "loadtest: all %d requests failed (results in %s); most common error: %s\n", agg.Total, out, first)
		return ExitFailure
	}
	if agg.Failed > 0 {
		log.Warn("some requests failed", "failed", agg.Failed, "total", agg.Total, "most_common", agg.Errors[0].Message)
	}
	log.Info("done", "out", out)
	return ExitOK
}

func workloadName(cfg *Config) string {
	w := "synthetic"
	if cfg.Trace != "" {
		w = "trace " + cfg.Trace
	}
	if cfg.RateProfile != "" {
		w += ", rate × " + cfg.profile.String()
	}
	return w
}

// newSource builds the workload; a trace is parsed and validated whole.
func newSource(cfg *Config, log *slog.Logger) (workload.Source, error) {
	var warp *mooncake.Warper
	if cfg.RateProfile != "" {
		warp = mooncake.NewWarper(cfg.profile)
	}
	if cfg.Trace != "" {
		recs, err := mooncake.ReadFile(cfg.Trace, cfg.BlockTokens, cfg.TraceLimit)
		if err != nil {
			return nil, err
		}
		src, err := workload.NewReplay(recs, workload.ReplayConfig{
			Replay: mooncake.Replay{
				Synth: mooncake.Synth{
					Vocab: cfg.Vocab, TokenMin: cfg.TokenMin, BlockTokens: cfg.BlockTokens,
					ReplayBlockTokens: cfg.TraceBlockTokens, Seed: cfg.Seed,
				},
				Speed: cfg.Speed, MaxInputTokens: cfg.MaxInputTokens, MaxOutputTokens: cfg.MaxOutputTokens,
				Rate: warp,
			},
			UseTimestamps: cfg.TraceTimestamps, IgnoreEOS: cfg.IgnoreEOS,
		})
		if err == nil && src.Len() < len(recs) {
			log.Warn("rate profile drops to 0 for good before the trace ends: later records are not sent",
				"records", len(recs), "sent", src.Len())
		}
		return src, err
	}
	var sched *arrival.Schedule
	if cfg.Rate > 0 {
		var err error
		if sched, err = arrival.NewWarped(arrival.Process(cfg.Arrival), cfg.Rate, cfg.Seed, warp); err != nil {
			return nil, err
		}
	}
	src, err := workload.NewSynthetic(workload.SyntheticConfig{
		Chat: cfg.Endpoint == string(openai.Chat), Input: cfg.input, Output: cfg.output, Turns: cfg.turns,
		TurnDelay: cfg.TurnDelay, SharedPrefixRatio: cfg.SharedPrefixRatio, PrefixPool: cfg.PrefixPool,
		Vocab: cfg.Vocab, TokenMin: cfg.TokenMin, Seed: cfg.Seed, IgnoreEOS: cfg.IgnoreEOS, Arrivals: sched,
	})
	if err != nil {
		return nil, err
	}
	return src, nil
}
