package engine

import (
	"time"

	"switchyard.dev/libs/engine/executor"
	"switchyard.dev/libs/engine/kvcache"
	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/engine/sched"
	"switchyard.dev/libs/kvhash"
)

// ModelInfo describes the served model and its KV cache.
type ModelInfo struct {
	Name       string
	VocabSize  int
	ContextLen int // longest prompt+output: min(model context, KV capacity)
	BlockSize  int
	NumBlocks  int
	BOS, EOS   uint32
	StopTokens []uint32
}

// ModelInfo returns what clients need to know about the model.
func (e *Engine) ModelInfo() ModelInfo {
	return ModelInfo{
		Name: e.model.Name, VocabSize: e.model.VocabSize, ContextLen: e.maxLen,
		BlockSize: e.cfg.BlockSize, NumBlocks: e.cfg.NumBlocks,
		BOS: e.model.BOS, EOS: e.model.EOS, StopTokens: append([]uint32(nil), e.model.StopTokens...),
	}
}

// Metrics is a point-in-time snapshot.
type Metrics struct {
	Running, Waiting int
	KVUsedBlocks     int
	KVTotalBlocks    int
	KVCachedBlocks   int // blocks reusable by prefix (held or evictable)
	// Cumulative counters since New.
	PromptTokens    int64
	PrefixHitTokens int64
	GeneratedTokens int64
	Preemptions     int64
	Steps           int64
	// LastStepTime is the executor time of the latest step.
	LastStepTime time.Duration
	// TokensPerSecond is generated tokens per wall second over the
	// latest steps (up to rateWindow of them).
	TokensPerSecond float64
	// FirstTokenMismatches counts requests whose Request.FirstToken (a
	// remote prefill's sample) differed from the engine's own first
	// sample: always 0 for greedy requests between identical models.
	FirstTokenMismatches int64
	// Tiers are the KV tiers below the arena, fastest first.
	Tiers []TierMetrics
}

// KVUsage is used/total blocks.
func (m Metrics) KVUsage() float64 {
	if m.KVTotalBlocks == 0 {
		return 0
	}
	return float64(m.KVUsedBlocks) / float64(m.KVTotalBlocks)
}

// Metrics returns a snapshot.
func (e *Engine) Metrics() Metrics {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.sched.Stats()
	var tm []TierMetrics
	if e.tiers != nil {
		tm = e.tiers.metrics()
	}
	return Metrics{
		Tiers:   tm,
		Running: e.sched.Running(), Waiting: e.sched.Waiting(),
		KVUsedBlocks: e.kv.Used(), KVTotalBlocks: e.kv.NumBlocks(), KVCachedBlocks: e.kv.Cached(),
		PromptTokens: int64(st.PromptTokens), PrefixHitTokens: int64(st.PrefixHitTokens),
		Preemptions: int64(st.Preemptions), GeneratedTokens: e.stats.generated, Steps: e.stats.steps,
		LastStepTime: e.stats.last, TokensPerSecond: e.stats.rate(),
		FirstTokenMismatches: e.stats.firstMismatch,
	}
}

// Subscribe reads KV event batches numbered above after.
func (e *Engine) Subscribe(after uint64) *kvevent.Subscription {
	return e.journal.Subscribe(after)
}

// Dump returns Stored events for every cached block, parents first,
// numbered with the sequence of the latest batch they reflect: subscribe
// after that number to continue gap-free.
func (e *Engine) Dump() kvevent.Batch {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.flushEvents()
	events := e.kv.Snapshot()
	if e.tiers != nil {
		events = append(events, e.tiers.snapshot(e.cfg.BlockSize)...)
	}
	return kvevent.Batch{Seq: e.journal.Last(), Events: events}
}

// ClearPrefixCache drops every cached prefix (emitting Cleared).
func (e *Engine) ClearPrefixCache() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.kv.Clear()
	e.flushEvents()
	if e.tiers != nil {
		// Cleared means every tier to a subscriber; the lower tiers keep
		// their blocks, so they are announced again.
		e.journal.Append(e.tiers.snapshot(e.cfg.BlockSize))
	}
}

// KV returns the KV arena and its block geometry, for a transfer library
// to register. Block b is Arena[b*BlockBytes:(b+1)*BlockBytes].
func (e *Engine) KV() executor.KV {
	e.mu.Lock()
	defer e.mu.Unlock()
	return executor.KV{Arena: e.kv.Arena(), BlockSize: e.cfg.BlockSize, BlockBytes: e.kv.Config().BlockBytes, NumBlocks: e.cfg.NumBlocks}
}

// AllocateForImport reserves n blocks for KV written by another process
// (disaggregated prefill), each held with one reference the caller owns.
// Write their regions, then CommitImported; or ReleaseBlocks to abandon
// them.
func (e *Engine) AllocateForImport(n int) ([]kvcache.Region, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	regs, err := e.kv.AllocateForImport(n)
	e.flushEvents() // blocks it evicted are no longer cached: say so now, not at the next step
	return regs, err
}

// CommitImported publishes imported blocks as cached prefix blocks holding
// tokens (BlockSize per block, a sequence start) under salt, so a request
// submitted with that prompt reuses them.
//
// The caller keeps a reference on every committed block, so none can be
// evicted before the request that imported them holds them itself:
// CommitImported returns the blocks now caching the tokens, in order
// (each imported block, or a block that cached that prefix already, in
// which case the imported copy is freed), and the caller ReleaseBlocks
// them once the request is submitted (or, if it never is, abandoned). On error
// nothing changes and the caller still owns the references on blocks:
// ReleaseBlocks(blocks) aborts the import.
func (e *Engine) CommitImported(blocks []int, tokens []uint32, salt uint64) ([]int, error) {
	return e.CommitImportedAfter(kvhash.Root, blocks, tokens, salt)
}

// CommitImportedAfter is CommitImported for blocks that continue the
// cached chain ending at hash parent (kvhash.Root: a sequence start): an
// importer that already holds a prompt's leading blocks imports only the
// rest.
func (e *Engine) CommitImportedAfter(parent uint64, blocks []int, tokens []uint32, salt uint64) ([]int, error) {
	h := kvhash.AppendBlockHashes(make([]uint64, 0, len(blocks)), parent, tokens, e.cfg.BlockSize, salt)
	e.mu.Lock()
	defer e.mu.Unlock()
	held, err := e.kv.CommitImported(blocks, parent, h, tokens)
	if err != nil {
		return nil, err
	}
	e.flushEvents()
	e.signal() // copies of blocks cached already were freed
	return held, nil
}

// EventSeq is the sequence number of the latest KV event batch: Subscribe
// after it to see only what happens from now on.
func (e *Engine) EventSeq() uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.flushEvents()
	return e.journal.Last()
}

// PinPrefix pins the cached blocks of the leading hashes so their KV can
// be read by a transfer (the export side); ReleaseBlocks unpins them.
func (e *Engine) PinPrefix(hashes []uint64) []kvcache.Region {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.kv.Pin(hashes)
}

// ReleaseBlocks drops references taken by AllocateForImport (abandoning
// an import), CommitImported or PinPrefix.
func (e *Engine) ReleaseBlocks(blocks []int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.kv.Release(blocks)
	e.offloadCommitted()
	e.signal()
}

// rateWindow is how many recent steps the tokens/s figure covers.
const rateWindow = 64

type stepSample struct {
	end    time.Time
	tokens int
}

// stepStats keeps step timing.
type stepStats struct {
	steps     int64
	generated int64
	// firstMismatch counts Request.FirstToken values that differed from
	// the engine's own first sample.
	firstMismatch int64
	last          time.Duration
	window        []stepSample
	firstPlan     time.Time
}

func (s *stepStats) now() time.Time { return time.Now() }

func (s *stepStats) planned(p *sched.Plan) {
	if len(p.Items) > 0 && len(s.window) == 0 {
		s.firstPlan = s.now()
	}
}

func (s *stepStats) completed(took time.Duration, tokens int) {
	s.steps++
	s.generated += int64(tokens)
	s.last = took
	if len(s.window) == rateWindow {
		s.firstPlan = s.window[0].end
		s.window = append(s.window[:0], s.window[1:]...)
	}
	s.window = append(s.window, stepSample{end: s.now(), tokens: tokens})
}

func (s *stepStats) rate() float64 {
	if len(s.window) == 0 {
		return 0
	}
	span := s.window[len(s.window)-1].end.Sub(s.firstPlan).Seconds()
	if span <= 0 {
		return 0
	}
	n := 0
	for _, w := range s.window {
		n += w.tokens
	}
	return float64(n) / span
}
