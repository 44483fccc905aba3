package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"switchyard.dev/libs/mooncake"
	"switchyard.dev/loadtest/internal/arrival"
	"switchyard.dev/loadtest/internal/dist"
	"switchyard.dev/loadtest/internal/openai"
)

// Config is every setting of a run. Each field is bound to a flag, so
// Settings (written into summary.json) reports the effective values,
// defaults and resolved model included.
type Config struct {
	URL      string
	Model    string
	apiKey   string
	Endpoint string
	Out      string
	Seed     uint64

	Concurrency int
	Rate        float64
	Arrival     string
	RateProfile string
	MaxRequests int
	Duration    time.Duration
	Grace       time.Duration
	Timeout     time.Duration

	SLATTFT time.Duration
	SLAITL  time.Duration
	SLAE2E  time.Duration

	IgnoreEOS bool
	ExtraBody string

	// Synthetic workload.
	InputLen          string
	OutputLen         string
	Turns             string
	TurnDelay         time.Duration
	SharedPrefixRatio float64
	PrefixPool        int
	Vocab             int
	TokenMin          int

	// Trace replay.
	Trace            string
	TraceLimit       int
	Speed            float64
	TraceTimestamps  bool
	BlockTokens      int
	TraceBlockTokens int
	MaxInputTokens   int
	MaxOutputTokens  int

	Plots            bool
	Progress         string
	ProgressInterval time.Duration
	Quiet            bool

	input, output, turns dist.Dist
	// profile is RateProfile parsed; the identity when it is empty.
	profile mooncake.RateProfile
	fs      *flag.FlagSet
}

// errUsage marks a bad command line (exit status 2).
var errUsage = errors.New("usage")

func newFlagSet(cfg *Config, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("loadtest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.URL, "url", "http://127.0.0.1:8000", "server root URL (OpenAI-compatible API under /v1)")
	fs.StringVar(&cfg.Model, "model", "", "model name; empty: the first id from GET /v1/models")
	fs.StringVar(&cfg.apiKey, "api-key", "", "API key sent as 'Authorization: Bearer KEY' (default $OPENAI_API_KEY)")
	fs.StringVar(&cfg.Endpoint, "endpoint", "completions", "completions (token-id prompts) or chat (text messages; synthetic only)")
	fs.StringVar(&cfg.Out, "out", "", "output folder (default results/<timestamp>)")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "seed for lengths, prompts, arrivals and trace tokens")

	fs.IntVar(&cfg.Concurrency, "concurrency", 0, "sessions in flight (closed loop; default 1), or the in-flight cap with --rate or trace timestamps (0: none)")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open loop: session arrivals per second (synthetic)")
	fs.StringVar(&cfg.Arrival, "arrival", "poisson", "arrival process with --rate: poisson or constant")
	fs.StringVar(&cfg.RateProfile, "rate-profile", "", "multiply the arrival rate (--rate or trace timestamps) by m(t) over the run's elapsed time: "+
		"const:M, sin:PERIOD,LOW,HIGH, step:AT,MULT, piecewise:T0=M0,T1=M1,... or a product of them joined by '*', e.g. 'sin:10m,1,3*step:20m,3'")
	fs.IntVar(&cfg.MaxRequests, "max-requests", 0, "stop after this many requests (synthetic default 100 when no --duration)")
	fs.DurationVar(&cfg.Duration, "duration", 0, "stop issuing requests after this long")
	fs.DurationVar(&cfg.Grace, "grace", 30*time.Second, "time in-flight requests may finish after --duration")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Minute, "per-request timeout, stream included")

	fs.DurationVar(&cfg.SLATTFT, "sla-ttft", 0, "goodput: a request's TTFT must be at most this (e.g. 500ms)")
	fs.DurationVar(&cfg.SLAITL, "sla-itl", 0, "goodput: a request's mean inter-token latency must be at most this")
	fs.DurationVar(&cfg.SLAE2E, "sla-e2e", 0, "goodput: a request's end-to-end latency must be at most this")

	fs.BoolVar(&cfg.IgnoreEOS, "ignore-eos", true, `send "ignore_eos": true so the server generates max_tokens`)
	fs.StringVar(&cfg.ExtraBody, "extra-body", "", `JSON object merged into every request body, e.g. '{"temperature":0}'`)

	fs.StringVar(&cfg.InputLen, "input-len", "fixed:256", "synthetic new input tokens per turn: N, fixed:N, uniform:LO,HI, normal:MEAN,STD")
	fs.StringVar(&cfg.OutputLen, "output-len", "fixed:64", "synthetic max_tokens per turn (same syntax)")
	fs.StringVar(&cfg.Turns, "turns", "fixed:1", "synthetic turns per session (same syntax); later turns resend the growing conversation")
	fs.DurationVar(&cfg.TurnDelay, "turn-delay", 0, "think time between turns of a session")
	fs.Float64Var(&cfg.SharedPrefixRatio, "shared-prefix-ratio", 0, "fraction [0,1] of each session's first prompt taken from a shared prefix")
	fs.IntVar(&cfg.PrefixPool, "prefix-pool", 1, "number of distinct shared prefixes")
	fs.IntVar(&cfg.Vocab, "vocab", 512, "token ids are drawn from [token-min, vocab): the served model's vocabulary size")
	fs.IntVar(&cfg.TokenMin, "token-min", 3, "smallest token id sent (skips special ids such as unk/bos/eos)")

	fs.StringVar(&cfg.Trace, "trace", "", "replay a Mooncake JSONL trace instead of a synthetic workload")
	fs.IntVar(&cfg.TraceLimit, "trace-limit", 0, "read only the first N trace records")
	fs.Float64Var(&cfg.Speed, "speed", 1, "trace time compression: 2 replays twice as fast")
	fs.BoolVar(&cfg.TraceTimestamps, "trace-timestamps", true, "send at the trace's timestamps; false: as fast as --concurrency allows")
	fs.IntVar(&cfg.BlockTokens, "block-tokens", 512, "tokens each trace hash id stands for in the trace")
	fs.IntVar(&cfg.TraceBlockTokens, "trace-block-tokens", 0, "tokens each hash id expands to when replayed (default block-tokens); smaller scales input_length down for short-context models")
	fs.IntVar(&cfg.MaxInputTokens, "max-input-tokens", 0, "truncate replayed prompts to this many tokens (0: no cap)")
	fs.IntVar(&cfg.MaxOutputTokens, "max-output-tokens", 0, "cap replayed output_length (0: no cap)")

	fs.BoolVar(&cfg.Plots, "plots", true, "draw PNG charts into the output folder")
	fs.StringVar(&cfg.Progress, "progress", "auto", "auto (bar on a terminal, lines otherwise), bar, lines or off")
	fs.DurationVar(&cfg.ProgressInterval, "progress-interval", 10*time.Second, "period of plain progress lines")
	fs.BoolVar(&cfg.Quiet, "quiet", false, "log warnings and errors only")
	return fs
}

// parseConfig parses run flags and validates them.
func parseConfig(args []string, stderr io.Writer, now time.Time) (*Config, error) {
	cfg := &Config{}
	fs := newFlagSet(cfg, stderr)
	fs.Usage = func() { usage(fs) }
	cfg.fs = fs
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if cfg.apiKey == "" {
		cfg.apiKey = os.Getenv("OPENAI_API_KEY")
	}
	if cfg.Out == "" {
		cfg.Out = "results/" + now.Format("20060102-150405")
	}
	if cfg.TraceBlockTokens == 0 {
		cfg.TraceBlockTokens = cfg.BlockTokens
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	return cfg, nil
}

func (c *Config) validate() error {
	var err error
	if c.input, err = dist.Parse(c.InputLen); err != nil {
		return fmt.Errorf("--input-len: %w", err)
	}
	if c.output, err = dist.Parse(c.OutputLen); err != nil {
		return fmt.Errorf("--output-len: %w", err)
	}
	if c.turns, err = dist.Parse(c.Turns); err != nil {
		return fmt.Errorf("--turns: %w", err)
	}
	switch {
	case c.Endpoint != string(openai.Completions) && c.Endpoint != string(openai.Chat):
		return fmt.Errorf("--endpoint %q: want completions or chat", c.Endpoint)
	case c.Trace != "" && c.Endpoint == string(openai.Chat):
		return errors.New("--trace replays token-id prompts: use --endpoint completions")
	case c.Trace != "" && c.Rate > 0:
		return errors.New("--rate does not apply to --trace (use --speed)")
	case c.Concurrency < 0 || c.MaxRequests < 0 || c.TraceLimit < 0 || c.MaxInputTokens < 0 || c.MaxOutputTokens < 0:
		return errors.New("counts must not be negative")
	case c.Rate < 0 || c.Duration < 0 || c.Grace < 0 || c.Timeout < 0:
		return errors.New("rates and durations must not be negative")
	case c.Arrival != string(arrival.Poisson) && c.Arrival != string(arrival.Constant):
		return fmt.Errorf("--arrival %q: want poisson or constant", c.Arrival)
	case c.Speed <= 0:
		return fmt.Errorf("--speed %g: must be > 0", c.Speed)
	}
	if err := c.validateRateProfile(); err != nil {
		return err
	}
	if c.Trace == "" && c.MaxRequests == 0 && c.Duration == 0 {
		c.MaxRequests = 100
	}
	if c.Trace == "" && c.Rate == 0 && c.Concurrency == 0 {
		c.Concurrency = 1
	}
	if c.Trace != "" && !c.TraceTimestamps && c.Concurrency == 0 {
		c.Concurrency = 1
	}
	return nil
}

// validateRateProfile parses --rate-profile, which varies an arrival rate
// and so needs open-loop load.
func (c *Config) validateRateProfile() error {
	if c.RateProfile == "" {
		return nil
	}
	var err error
	if c.profile, err = mooncake.ParseRateProfile(c.RateProfile); err != nil {
		return fmt.Errorf("--rate-profile: %w", err)
	}
	switch {
	case c.Trace == "" && c.Rate == 0:
		return errors.New("--rate-profile varies an arrival rate: give --rate (open loop) or --trace; closed-loop load has none")
	case c.Trace != "" && !c.TraceTimestamps:
		return errors.New("--rate-profile warps trace timestamps: it does not apply with --trace-timestamps=false")
	}
	return nil
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `loadtest: benchmark an OpenAI-compatible streaming endpoint.

Usage:
  loadtest [run] [flags]              synthetic workload, or --trace FILE to replay
  loadtest compare [--format markdown|text] RUN_DIR RUN_DIR...

Examples:
  loadtest --url http://127.0.0.1:8000 --concurrency 8 --max-requests 200 --input-len normal:512,64 --output-len 128
  loadtest --rate 4 --duration 2m --turns uniform:2,5 --shared-prefix-ratio 0.3 --sla-ttft 500ms --sla-itl 50ms
  loadtest --trace ../shared/traces/conversation_trace.jsonl --speed 10 --trace-limit 500 --out results/conv
  loadtest --rate 2 --duration 30m --rate-profile 'sin:10m,0.5,2*step:20m,2'
  loadtest compare results/a results/b

Flags:
`)
	fs.PrintDefaults()
}

// Settings maps every flag name to its effective value; the API key is
// replaced by whether one was set.
func (c *Config) Settings() map[string]string {
	m := map[string]string{}
	c.fs.VisitAll(func(f *flag.Flag) { m[f.Name] = f.Value.String() })
	m["api-key"] = map[bool]string{true: "(set)", false: ""}[c.apiKey != ""]
	return m
}
