package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"switchyard.dev/services/planner/internal/measure"
)

// Profile is `planner profile`: it measures one idle worker and writes
// its profile.
func Profile(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("planner profile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: planner profile -worker http://HOST:PORT -out FILE [flags]\n\nMeasures an idle worker (prefill time against input length, ITL against batch and context) and writes the profile the planner plans with.")
		fs.PrintDefaults()
	}
	var cfg measure.Config
	out := fs.String("out", "", "profile file to write (required)")
	fs.StringVar(&cfg.Worker, "worker", "", "the worker's base URL, e.g. http://127.0.0.1:9200 (required; it must be otherwise idle)")
	inputs := fs.String("inputs", "", "prompt lengths of the prefill points, comma-separated (default 64 doubling to half the context)")
	batches := fs.String("batches", "", "batch sizes of the decode points (default 1,2,4,...,64)")
	contexts := fs.String("contexts", "", "context lengths of the decode points (default an eighth and a half of the context)")
	fs.IntVar(&cfg.Tries, "tries", 3, "tries per prefill point (the median is kept)")
	fs.IntVar(&cfg.Tokens, "tokens", 32, "tokens each decode sequence generates")
	fs.StringVar(&cfg.Executor, "executor", "", "the worker's executor, recorded in the profile (sim, llama, ...)")
	timeout := fs.Duration("timeout", 10*time.Minute, "bound on the whole measurement")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var err error
	for _, l := range []struct {
		flag string
		s    string
		dst  *[]int
	}{{"-inputs", *inputs, &cfg.Inputs}, {"-batches", *batches, &cfg.Batches}, {"-contexts", *contexts, &cfg.Contexts}} {
		if *l.dst, err = ints(l.s); err != nil {
			fmt.Fprintf(stderr, "planner profile: %s: %v\n", l.flag, err)
			return 2
		}
	}
	if cfg.Worker == "" || *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "planner profile: -worker URL and -out FILE are required")
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cfg.Client, cfg.Log = &http.Client{}, stderr
	p, err := measure.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "planner profile: %v\n", err)
		return 1
	}
	if err := p.Save(*out); err != nil {
		fmt.Fprintf(stderr, "planner profile: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "planner profile: %s: model %q, %d prefill and %d decode points\n", *out, p.Model, len(p.Prefill), len(p.Decode))
	return 0
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: want positive integers", s)
		}
		out = append(out, n)
	}
	return out, nil
}
