package app

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"switchyard.dev/libs/kvtier"
	"switchyard.dev/services/router/internal/policy"
)

// flags are the router's own settings.
type flags struct {
	mode             string
	temperature      float64
	prefillLoadScale float64
	ownPrefill       float64
	prefixPull       float64
	weights          policy.TierWeights
	fixedWeights     bool
	disaggThreshold  int
	blockSize        int
	expectedOutput   int
	prefillBlockTime time.Duration
	loadTTL          time.Duration
	approx           string
	approxTTL        time.Duration
	approxMaxBlocks  int
	redisAddr        string
	snapshotInterval time.Duration
	namespace        string
	sharePeers       bool
	canaryWeight     float64
}

func (f *flags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.mode, "mode", policy.ModeKV, "routing mode: kv, round-robin, random, least-loaded or direct (requests with hints.worker_id are always direct)")
	fs.Float64Var(&f.temperature, "temperature", 0, "kv mode: 0 picks the lowest cost (random tie-break); > 0 samples softmax over normalized costs")
	fs.Float64Var(&f.prefillLoadScale, "prefill-load-scale", policy.DefaultPrefillLoadScale, "weight of prefill blocks against decode blocks in the cost")
	fs.Float64Var(&f.prefixPull, "prefix-pull-weight", policy.DefaultPrefixPullWeight, "kv mode: overlap credit of a block a worker would copy from the peer holding it (prefix pull; both publish KV transfer agents); 0 turns prefix pull off")
	fs.Float64Var(&f.ownPrefill, "own-prefill-weight", policy.DefaultOwnPrefillWeight, "weight of the request's own uncached blocks against a worker's queued prefill blocks (>= 1)")
	f.weights = policy.DefaultTierWeights()
	fs.BoolVar(&f.fixedWeights, "fixed-tier-weights", false, "credit every worker's tiers with -tier-weights, instead of deriving each worker's credits from the tier load and prefill times it measures and publishes (workers publishing none use -tier-weights anyway)")
	fs.Var(&f.weights, "tier-weights", "comma-separated `weights`: overlap credit per cached block in "+tierNames()+" tiers")
	fs.IntVar(&f.disaggThreshold, "disagg-threshold-tokens", 512, "with prefill workers for the model, prefill remotely when the uncached prompt exceeds this")
	fs.IntVar(&f.blockSize, "block-size", 16, "KV block size in tokens when workers publish no block_size meta")
	fs.IntVar(&f.expectedOutput, "expected-output-tokens", 256, "decode length assumed for predicted load when hints give none")
	fs.DurationVar(&f.prefillBlockTime, "prefill-block-time", time.Millisecond, "estimated prefill time per uncached block (predicted prefill load ends after it)")
	fs.DurationVar(&f.loadTTL, "load-ttl", 2*time.Minute, "predicted load of a routed request is dropped after this unless released earlier")
	fs.StringVar(&f.approx, "approx", "auto", "approximate KV caches from routing decisions: off, auto (workers that serve no KV events) or all")
	fs.DurationVar(&f.approxTTL, "approx-ttl", 2*time.Minute, "approximate mode: how long a routed prefix counts as cached")
	fs.IntVar(&f.approxMaxBlocks, "approx-max-blocks", 65536, "approximate mode: most blocks assumed cached per worker")
	fs.Func("vllm-endpoint", "removed: run vLLM/SGLang behind a worker (-engine vllm|sglang), which re-hashes their KV events (docs/engines.md)", func(string) error {
		return errors.New("removed: the router no longer reads vLLM/SGLang ZeroMQ events, whose block hashes never match its lookups; run the engine behind a switchyard worker (-engine vllm|sglang), which re-hashes them and serves them like any worker's (docs/engines.md)")
	})
	fs.StringVar(&f.redisAddr, "redis-addr", "", "Redis host:port for index snapshots (empty: no snapshots)")
	fs.DurationVar(&f.snapshotInterval, "snapshot-interval", 10*time.Second, "how often the index is saved to Redis")
	fs.StringVar(&f.namespace, "namespace", "default", "snapshot namespace: routers of one namespace share the key switchyard:router:<namespace>:index")
	fs.Float64Var(&f.canaryWeight, "canary-weight", 0.1, "share of a role's requests its workers tagged canary take while the planner publishes no rollout for the role, in [0, 1] (see docs/rollouts.md)")
	fs.BoolVar(&f.sharePeers, "share-load", true, "share predicted load with peer routers found in discovery")
}

func (f *flags) validate() error {
	modes := policy.NewRegistry().Modes()
	if !slices.Contains(modes, f.mode) {
		return fmt.Errorf("-mode=%q: want one of %v", f.mode, modes)
	}
	if f.ownPrefill < 1 {
		return fmt.Errorf("-own-prefill-weight must be at least 1")
	}
	if f.temperature < 0 || f.prefillLoadScale < 0 || f.prefixPull < 0 {
		return fmt.Errorf("-temperature, -prefill-load-scale and -prefix-pull-weight must not be negative")
	}
	if f.blockSize <= 0 {
		return fmt.Errorf("-block-size=%d: must be positive", f.blockSize)
	}
	if f.approx != "off" && f.approx != "auto" && f.approx != "all" {
		return fmt.Errorf("-approx=%q: want off, auto or all", f.approx)
	}
	if f.loadTTL <= 0 || f.approxTTL <= 0 || f.snapshotInterval <= 0 {
		return fmt.Errorf("-load-ttl, -approx-ttl and -snapshot-interval must be positive")
	}
	if f.redisAddr != "" {
		host, port, err := net.SplitHostPort(f.redisAddr)
		if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p <= 0 || p > 65535 {
			return fmt.Errorf("-redis-addr=%q: want host:port", f.redisAddr)
		}
	}
	return nil
}

// tierNames lists the tiers in -tier-weights order: "device,host,disk,external".
func tierNames() string {
	names := make([]string, kvtier.Count)
	for t := range kvtier.Tier(kvtier.Count) {
		names[t] = t.String()
	}
	return strings.Join(names, ",")
}
