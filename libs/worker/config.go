package worker

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/llama"
	"switchyard.dev/libs/engine/sched"
	"switchyard.dev/libs/kvbm"
	"switchyard.dev/libs/kvbm/s3tier"
	"switchyard.dev/libs/nixl/backend/ucx"
	"switchyard.dev/libs/worker/disagg"
)

// Executors selectable with -executor.
const (
	ExecutorLlama = "llama"
	ExecutorSim   = "sim"
)

// TinyRandomName is the served name of the built-in model (-executor=llama
// without -model).
const TinyRandomName = "tiny-random"

// Config is a worker's own configuration, filled from flags by Register
// and checked by Validate.
type Config struct {
	// EngineCfg picks the engine (-engine): the built-in one, configured
	// by the flags below, or a third-party server (package engines).
	EngineCfg EngineConfig

	Executor  string
	Model     string // llama2.c checkpoint; empty means the tiny random model
	Tokenizer string // llama2.c tokenizer.bin; see ResolveTokenizer
	ModelName string
	Seed      uint64 // weights of the tiny random model

	BlockSize      int
	NumBlocks      int
	MaxRunning     int
	MaxBatchTokens int
	// LongPrefillTokens caps a prompt's chunk per step while several are
	// prefilled (engine.Config.LongPrefillTokens).
	LongPrefillTokens int
	// PrefillOrder shares a step among prompts (engine.Config.PrefillOrder).
	PrefillOrder string
	EventBuffer  int

	// Disaggregated prefill (package disagg).
	Disagg          string        // disagg.ModeAuto or disagg.ModeOff
	DisaggThreshold int           // uncached prompt tokens above which to prefill remotely
	DisaggTimeout   time.Duration // bound on one remote prefill
	KVTransfer      string        // comma-separated nixl backends, or "none"
	KVTransferAddr  string        // tcp backend listen address
	UCXIsolate      bool          // run the ucx backend's UCX in a child process

	SimSpeedup float64
	SimProfile string
	SimVocab   int
	SimContext int
	SimKVBytes int // per token

	// KV tiers below the arena (libs/kvbm): host memory and local disk.
	HostBlocks    int
	DiskDir       string
	DiskBlocks    int
	DiskWriteMBps int // offload's write budget into the disk tier; 0: no cap
	// The shared object-store tier (G4): any S3-compatible endpoint.
	S3Endpoint  string
	S3Bucket    string
	S3Blocks    int
	S3WriteMBps int
}

// Register adds the worker flags to fs.
func (c *Config) Register(fs *flag.FlagSet) {
	c.registerEngine(fs)
	fs.StringVar(&c.Executor, "executor", ExecutorLlama, "model executor: llama (real forward pass) or sim (timing simulator)")
	fs.StringVar(&c.Model, "model", "", "llama2.c checkpoint file; empty serves a built-in tiny random model with a byte tokenizer")
	fs.StringVar(&c.Tokenizer, "tokenizer", "", "llama2.c tokenizer file; default tokenizer.bin beside -model, else tok<vocab>.bin beside it")
	fs.StringVar(&c.ModelName, "model-name", "", `served model name; default the checkpoint's base name without extension, "`+TinyRandomName+`", or "sim"`)
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the tiny random model's weights")
	fs.IntVar(&c.BlockSize, "block-size", 16, "tokens per KV block")
	fs.IntVar(&c.NumBlocks, "num-blocks", 0, "KV blocks; 0 means room for 16 full-context sequences")
	fs.IntVar(&c.MaxRunning, "max-running", 0, "most sequences in a batch; 0 means 64")
	fs.IntVar(&c.MaxBatchTokens, "max-batch-tokens", 0, "token budget of one step (longer prompts are prefilled in chunks); 0 means 512")
	fs.IntVar(&c.LongPrefillTokens, "long-prefill-tokens", 0, "while several prompts are prefilled, at most this many tokens of each per step, so short prompts pass long ones; 0 disables")
	fs.StringVar(&c.PrefillOrder, "prefill-order", sched.OrderFCFS, "how a step's token budget is shared among prompts: fcfs (arrival order) or shortest (decodes, then shortest remaining prompt first, with aging)")
	fs.IntVar(&c.EventBuffer, "kv-event-buffer", 0, "KV event batches kept for subscribers to resume; 0 means 1024")
	fs.StringVar(&c.Disagg, "disagg", disagg.ModeAuto, "disaggregated prefill: auto (long uncached prompts go to the router-chosen prefill worker) or off")
	fs.IntVar(&c.DisaggThreshold, "disagg-threshold-tokens", 512, "uncached prompt tokens above which -disagg=auto prefills on a prefill worker")
	fs.DurationVar(&c.DisaggTimeout, "disagg-timeout", 30*time.Second, "bound on one remote prefill (compute and KV transfer); past it the prompt is prefilled locally")
	fs.StringVar(&c.KVTransfer, "kv-transfer", "tcp", `KV transfer backends in preference order (tcp, ucx with a -tags ucx build), or "none"`)
	fs.BoolVar(&c.UCXIsolate, "kv-transfer-ucx-isolate", true, "run the ucx KV transfer backend's UCX in a child process, so that an abort inside UCX (libucx 1.13's assertions) ends only that process and the worker goes on over its next backend; the KV arena is then shared memory (docs/security.md)")
	fs.StringVar(&c.KVTransferAddr, "kv-transfer-listen", "127.0.0.1:0", "listen address of the tcp KV transfer backend (peers learn it from the transfer metadata)")
	fs.Float64Var(&c.SimSpeedup, "sim-speedup", 1, "sim: divide every step time by this; 0 or inf means steps take no time")
	fs.StringVar(&c.SimProfile, "sim-profile", "", "sim: measured timing profile (JSON); default the built-in polynomial")
	fs.IntVar(&c.SimVocab, "sim-vocab", 32000, "sim: vocabulary size (at least 259)")
	fs.IntVar(&c.SimContext, "sim-context", 8192, "sim: context length in tokens")
	fs.IntVar(&c.HostBlocks, "kv-host-blocks", 0, "KV blocks kept in host memory below the engine's pool (G2): an evicted block is onboarded from there instead of recomputed; 0: no host tier")
	fs.StringVar(&c.DiskDir, "kv-disk-dir", "", "directory of the local-disk KV tier (G3), one per worker (its slab is locked); empty: no disk tier")
	fs.IntVar(&c.DiskBlocks, "kv-disk-blocks", 0, "KV blocks in the disk tier, preallocated at start-up (needs -kv-disk-dir)")
	fs.IntVar(&c.DiskWriteMBps, "kv-disk-write-mbps", 0, "write budget of offload into the disk tier, MB/s; 0: no cap")
	fs.StringVar(&c.S3Endpoint, "kv-s3-endpoint", "", "URL of the S3-compatible store of the shared KV tier (G4), whose blocks every worker of the model can load; credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or AWS_PROFILE); empty with -kv-s3-bucket: AWS's endpoint")
	fs.StringVar(&c.S3Bucket, "kv-s3-bucket", "", "bucket of the shared KV tier; empty: no shared tier")
	fs.IntVar(&c.S3Blocks, "kv-s3-blocks", 1<<20, "how many shared-tier blocks the worker keeps track of (the store holds what it holds)")
	fs.IntVar(&c.S3WriteMBps, "kv-s3-write-mbps", 0, "write budget of offload into the shared tier, MB/s; 0: no cap")
	fs.IntVar(&c.SimKVBytes, "sim-kv-bytes-per-token", 0, "sim: keep a KV arena of this many bytes a token (nothing is computed into it), so the worker can move KV with -kv-transfer (remote prefill, prefix pull); 0: no arena, prompts are always prefilled locally")
}

// Validate checks the flags and fills in the tokenizer path and the model
// name. Every error is one line naming the flag and its value.
func (c *Config) Validate() error {
	if err := c.validateSizes(); err != nil {
		return err
	}
	if err := c.validateDisagg(); err != nil {
		return err
	}
	if err := c.validateTiers(); err != nil {
		return err
	}
	if err := c.validateEngine(); err != nil || c.EngineCfg.Engine != EngineBuiltin {
		return err
	}
	switch c.Executor {
	case ExecutorLlama:
		return c.validateLlama()
	case ExecutorSim:
		return c.validateSim()
	default:
		return fmt.Errorf("-executor=%q: want %s or %s", c.Executor, ExecutorLlama, ExecutorSim)
	}
}

// Bounds on the KV pool's shape.
const (
	MaxBlockSize = 1024
	MaxNumBlocks = 1 << 24
)

func (c *Config) validateSizes() error {
	for _, f := range []struct {
		name string
		v    int
		min  int
	}{
		{"block-size", c.BlockSize, 1},
		{"num-blocks", c.NumBlocks, 0},
		{"max-running", c.MaxRunning, 0},
		{"max-batch-tokens", c.MaxBatchTokens, 0},
		{"long-prefill-tokens", c.LongPrefillTokens, 0},
		{"kv-event-buffer", c.EventBuffer, 0},
	} {
		if f.v < f.min {
			return fmt.Errorf("-%s=%d: must be at least %d", f.name, f.v, f.min)
		}
	}
	if c.NumBlocks > 0 && c.NumBlocks < 2 {
		return fmt.Errorf("-num-blocks=%d: need at least 2 blocks", c.NumBlocks)
	}
	// Upper bounds: products of these size the KV pool and the context,
	// and a huge one wrapped to 0 (a worker that served nothing yet
	// published itself).
	if c.BlockSize > MaxBlockSize {
		return fmt.Errorf("-block-size=%d: at most %d tokens a block", c.BlockSize, MaxBlockSize)
	}
	if c.NumBlocks > MaxNumBlocks {
		return fmt.Errorf("-num-blocks=%d: at most %d", c.NumBlocks, MaxNumBlocks)
	}
	if sched.CheckOrder(c.PrefillOrder) != nil {
		return fmt.Errorf("-prefill-order=%q: want %s or %s", c.PrefillOrder, sched.OrderFCFS, sched.OrderShortest)
	}
	return nil
}

func (c *Config) validateDisagg() error {
	switch {
	case c.Disagg != disagg.ModeAuto && c.Disagg != disagg.ModeOff:
		return fmt.Errorf("-disagg=%q: want %s or %s", c.Disagg, disagg.ModeAuto, disagg.ModeOff)
	case c.DisaggThreshold < 0:
		return fmt.Errorf("-disagg-threshold-tokens=%d: must be at least 0", c.DisaggThreshold)
	case c.DisaggTimeout <= 0:
		return fmt.Errorf("-disagg-timeout=%v: must be positive", c.DisaggTimeout)
	}
	_, err := transferBackends(c.KVTransfer, c.KVTransferAddr, nil, false)
	return err
}

// sharedKV reports whether the KV arena must be shared memory: the ucx
// backend runs UCX in a child process that maps it.
func (c *Config) sharedKV() bool {
	if !c.UCXIsolate || !ucx.Available {
		return false
	}
	for name := range strings.SplitSeq(c.KVTransfer, ",") {
		if strings.TrimSpace(name) == ucx.Name {
			return true
		}
	}
	return false
}

func (c *Config) validateLlama() error {
	switch {
	case c.SimProfile != "":
		return fmt.Errorf("-sim-profile=%q: only used with -executor=sim", c.SimProfile)
	case c.SimKVBytes != 0:
		return fmt.Errorf("-sim-kv-bytes-per-token=%d: only used with -executor=sim (the model sets its KV size)", c.SimKVBytes)
	}
	if c.Model == "" {
		if c.Tokenizer != "" {
			return fmt.Errorf("-tokenizer=%q: needs -model (the built-in model uses a byte tokenizer)", c.Tokenizer)
		}
		if c.ModelName == "" {
			c.ModelName = TinyRandomName
		}
		return nil
	}
	if err := regularFile("model", c.Model); err != nil {
		return err
	}
	if c.Tokenizer == "" {
		tok, err := ResolveTokenizer(c.Model)
		if err != nil {
			return err
		}
		c.Tokenizer = tok
	} else if err := regularFile("tokenizer", c.Tokenizer); err != nil {
		return err
	}
	if c.ModelName == "" {
		base := filepath.Base(c.Model)
		c.ModelName = strings.TrimSuffix(base, filepath.Ext(base))
	}
	return nil
}

func (c *Config) validateSim() error {
	switch {
	case c.Model != "":
		return fmt.Errorf("-model=%q: only used with -executor=llama (the simulator has no weights)", c.Model)
	case c.Tokenizer != "":
		return fmt.Errorf("-tokenizer=%q: only used with -executor=llama (the simulator uses a byte tokenizer)", c.Tokenizer)
	case math.IsNaN(c.SimSpeedup) || c.SimSpeedup < 0:
		return fmt.Errorf("-sim-speedup=%v: must be 0 (no time), positive, or inf", c.SimSpeedup)
	case c.SimVocab < 259:
		return fmt.Errorf("-sim-vocab=%d: must be at least 259 (the byte tokenizer's ids)", c.SimVocab)
	case c.SimContext < 2:
		return fmt.Errorf("-sim-context=%d: must be at least 2", c.SimContext)
	case c.SimKVBytes < 0:
		return fmt.Errorf("-sim-kv-bytes-per-token=%d: must be 0 (no arena) or more", c.SimKVBytes)
	}
	if c.SimProfile != "" {
		if err := regularFile("sim-profile", c.SimProfile); err != nil {
			return err
		}
	}
	if c.ModelName == "" {
		c.ModelName = "sim"
	}
	return nil
}

// ResolveTokenizer finds the tokenizer of a llama2.c checkpoint in its
// directory: tok<vocab>.bin (llama2.c's name for a custom vocabulary:
// tok512.bin for stories260K; vocab read from the checkpoint header), else
// tokenizer.bin (llama2.c's 32000-token default). The vocabulary's own file
// comes first: beside a 512-token model, the default 32000-token file is
// another model's.
func ResolveTokenizer(model string) (string, error) {
	dir := filepath.Dir(model)
	hdr, err := readHeader(model)
	if err != nil {
		return "", fmt.Errorf("-model=%q: %w", model, err)
	}
	custom := filepath.Join(dir, fmt.Sprintf("tok%d.bin", hdr.VocabSize))
	if regularFile("tokenizer", custom) == nil {
		return custom, nil
	}
	def := filepath.Join(dir, "tokenizer.bin")
	if regularFile("tokenizer", def) == nil {
		return def, nil
	}
	return "", fmt.Errorf("-tokenizer: not set, and neither %s nor %s exists beside -model=%q", custom, def, model)
}

func readHeader(path string) (llama.Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return llama.Config{}, err
	}
	defer f.Close()
	b := make([]byte, llama.HeaderSize)
	if _, err := io.ReadFull(f, b); err != nil {
		return llama.Config{}, fmt.Errorf("reading the checkpoint header: %w", err)
	}
	return llama.ParseHeader(b)
}

func regularFile(flagName, path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("-%s=%q: no such file", flagName, path)
	case err != nil:
		return fmt.Errorf("-%s=%q: %w", flagName, path, err)
	case !st.Mode().IsRegular():
		return fmt.Errorf("-%s=%q: not a regular file", flagName, path)
	}
	return nil
}

func (c *Config) validateTiers() error {
	switch {
	case c.HostBlocks < 0 || c.HostBlocks > MaxNumBlocks:
		return fmt.Errorf("-kv-host-blocks=%d: want 0 to %d", c.HostBlocks, MaxNumBlocks)
	case c.DiskBlocks < 0 || c.DiskBlocks > MaxNumBlocks:
		return fmt.Errorf("-kv-disk-blocks=%d: want 0 to %d", c.DiskBlocks, MaxNumBlocks)
	case c.DiskWriteMBps < 0:
		return fmt.Errorf("-kv-disk-write-mbps=%d: must not be negative", c.DiskWriteMBps)
	case c.DiskBlocks > 0 && c.DiskDir == "":
		return fmt.Errorf("-kv-disk-blocks=%d: needs -kv-disk-dir", c.DiskBlocks)
	case c.DiskDir != "" && c.DiskBlocks == 0:
		return fmt.Errorf("-kv-disk-dir=%q: needs -kv-disk-blocks", c.DiskDir)
	case c.S3Endpoint != "" && c.S3Bucket == "":
		return fmt.Errorf("-kv-s3-endpoint=%q: needs -kv-s3-bucket", c.S3Endpoint)
	case c.S3Bucket != "" && (c.S3Blocks <= 0 || c.S3Blocks > MaxNumBlocks):
		return fmt.Errorf("-kv-s3-blocks=%d: want 1 to %d", c.S3Blocks, MaxNumBlocks)
	case c.S3WriteMBps < 0:
		return fmt.Errorf("-kv-s3-write-mbps=%d: must not be negative", c.S3WriteMBps)
	case c.hasTiers() && c.Executor == ExecutorSim && c.SimKVBytes == 0:
		return errors.New("-kv-host-blocks/-kv-disk-blocks/-kv-s3-bucket: a sim worker has no KV bytes to keep; set -sim-kv-bytes-per-token")
	}
	return nil
}

// hasTiers reports whether the worker keeps KV tiers below its arena.
func (c *Config) hasTiers() bool { return c.HostBlocks > 0 || c.DiskBlocks > 0 || c.S3Bucket != "" }

// Tiers returns the engine's KV tiers below the arena, fastest first.
func (c *Config) Tiers() []engine.TierConfig { return c.tiers(nil) }

// tiers is Tiers with the shared tier's transfers reported to rep (nil:
// not reported).
func (c *Config) tiers(rep *sharedReporter) []engine.TierConfig {
	var out []engine.TierConfig
	if c.HostBlocks > 0 {
		n := c.HostBlocks
		out = append(out, engine.TierConfig{Open: func(bb int, on kvbm.OnChange) (kvbm.Tier, error) {
			return kvbm.NewHost(kvbm.HostConfig{Blocks: n, BlockBytes: bb, OnChange: on})
		}})
	}
	if c.DiskBlocks > 0 {
		dir, n, bs := c.DiskDir, c.DiskBlocks, c.BlockSize
		out = append(out, engine.TierConfig{
			Open: func(bb int, on kvbm.OnChange) (kvbm.Tier, error) {
				d, err := kvbm.OpenDisk(kvbm.DiskConfig{Dir: dir, Blocks: n, BlockBytes: bb, MaxTokens: bs, OnChange: on})
				if err != nil {
					return nil, fmt.Errorf("-kv-disk-dir=%q: %w", dir, err)
				}
				return d, nil
			},
			WriteBytesPerSecond: int64(c.DiskWriteMBps) * 1e6,
		})
	}
	if c.S3Bucket != "" {
		// The model's name keys its blocks: workers serving the same model
		// (and block size) share them.
		cfg := s3tier.Config{Endpoint: c.S3Endpoint, Bucket: c.S3Bucket, Namespace: s3tier.Namespace(c.ModelName), BlockSize: c.BlockSize, Blocks: c.S3Blocks}
		out = append(out, engine.TierConfig{
			Open: func(bb int, on kvbm.OnChange) (kvbm.Tier, error) {
				cfg.BlockBytes, cfg.OnChange = bb, on
				if rep != nil {
					rep.setBlockBytes(bb)
					cfg.Observe = rep
				}
				t, err := s3tier.Open(context.Background(), cfg)
				if err != nil {
					return nil, fmt.Errorf("-kv-s3-endpoint=%q -kv-s3-bucket=%q: %w", c.S3Endpoint, c.S3Bucket, err)
				}
				return t, nil
			},
			WriteBytesPerSecond: int64(c.S3WriteMBps) * 1e6,
		})
	}
	return out
}
