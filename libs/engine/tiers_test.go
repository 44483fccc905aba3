package engine

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvbm"
	"switchyard.dev/libs/kvbm/s3tier"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/mesh/deptest"
)

func hostTier(blocks int) TierConfig {
	return TierConfig{Open: func(bb int, on kvbm.OnChange) (kvbm.Tier, error) {
		return kvbm.NewHost(kvbm.HostConfig{Blocks: blocks, BlockBytes: bb, OnChange: on})
	}}
}

func diskTier(dir string, blocks int) TierConfig {
	return TierConfig{Open: func(bb int, on kvbm.OnChange) (kvbm.Tier, error) {
		return kvbm.OpenDisk(kvbm.DiskConfig{Dir: dir, Blocks: blocks, BlockBytes: bb, MaxTokens: 16, OnChange: on})
	}}
}

// tiny is an arena of 16 blocks of 16 tokens: two long prompts evict a
// third's prefix.
func tinyG1(tiers ...TierConfig) Config { return Config{BlockSize: 16, NumBlocks: 16, Tiers: tiers} }

// waitFor polls cond until it holds or the test's patience runs out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// evictFromDevice waits for a's blocks to be offloaded, runs other
// prompts until none of a's leading blocks is in the arena any more, and
// waits for the offloads they caused. Offload never holds a block back
// from eviction: on a busy machine the offloader may not have run before
// the next prompt evicts, so the test waits for it first.
func evictFromDevice(t *testing.T, e *Engine, a []uint32) {
	t.Helper()
	waitFor(t, "the prompt's offloads", e.offloadsDone)
	hashes := kvhash.BlockHashes(a[:(len(a)-1)/16*16], 16, 0)
	for salt := 2; ; salt++ {
		if salt > 12 {
			t.Fatal("the prefix is still cached on the device after ten other prompts")
		}
		run(t, e, Request{Prompt: prompt(150, salt), Stop: StopParams{MaxTokens: 8, IgnoreEOS: true}})
		e.mu.Lock() // Probe, not PinPrefix: a pin would refresh the block in the LRU
		held, _ := e.kv.Probe(hashes[:1])
		e.mu.Unlock()
		if held == 0 {
			break
		}
	}
	waitFor(t, "offloads to finish", e.offloadsDone)
}

// Greedy output is byte-identical whether a prompt's prefix was computed,
// or onboarded from host memory, from disk, or from disk behind a host
// tier too small to keep it, alone and beside other requests.
func TestTierOnboardingExact(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		tiers func(t *testing.T) []TierConfig
		from  kvtier.Tier
	}{
		{"host", func(*testing.T) []TierConfig { return []TierConfig{hostTier(64)} }, kvtier.Host},
		{"disk", func(t *testing.T) []TierConfig { return []TierConfig{diskTier(t.TempDir(), 64)} }, kvtier.Disk},
		{"disk behind a small host", func(t *testing.T) []TierConfig {
			return []TierConfig{hostTier(2), diskTier(t.TempDir(), 64)}
		}, kvtier.Disk},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			exec := stories(t)
			a := exec.Tokenizer().Encode("Once upon a time, there was a little girl named Lily. She loved to play outside in the park with her friends and her dog.", true, false)
			req := Request{Prompt: a, Stop: StopParams{MaxTokens: 40, IgnoreEOS: true}}
			ref := run(t, start(t, Config{BlockSize: 16}, stories(t)), req)

			e := start(t, tinyG1(tc.tiers(t)...), exec)
			if first := run(t, e, req); !sameTokens(first.tokens, ref.tokens) {
				t.Fatalf("cold run: %v, want %v", first.tokens, ref.tokens)
			}
			evictFromDevice(t, e, a)
			got := run(t, e, req)
			if !sameTokens(got.tokens, ref.tokens) || got.text != ref.text {
				t.Fatalf("onboarded from %s: %q, want %q", tc.from, got.text, ref.text)
			}
			full := (len(a) - 1) / 16 * 16
			if got.final.Usage.CachedPromptTokens != full {
				t.Errorf("cached prompt tokens %d; want the %d onboarded", got.final.Usage.CachedPromptTokens, full)
			}
			if n := onboarded(e, tc.from); n < int64(full/16) {
				t.Errorf("%d blocks onboarded from %s; want at least %d", n, tc.from, full/16)
			}

			// In a batch: the same prompt twice beside another, all at once.
			evictFromDevice(t, e, a)
			streams := make([]*Stream, 3)
			for i, r := range []Request{req, {Prompt: prompt(60, 99), Stop: StopParams{MaxTokens: 20, IgnoreEOS: true}}, req} {
				st, err := e.Submit(t.Context(), r)
				if err != nil {
					t.Fatal(err)
				}
				streams[i] = st
			}
			for _, i := range []int{0, 2} {
				if r := collect(t, streams[i]); !sameTokens(r.tokens, ref.tokens) {
					t.Fatalf("batched request %d onboarded from %s: %v, want %v", i, tc.from, r.tokens, ref.tokens)
				}
			}
			collect(t, streams[1])
		})
	}
}

func onboarded(e *Engine, tier kvtier.Tier) int64 {
	for _, m := range e.Metrics().Tiers {
		if m.Tier == tier {
			return m.Onboarded
		}
	}
	return 0
}

// The event stream tells every tier's contents exactly: replayed from the
// start, it equals a dump and each tier's own listing.
func TestTierEventsExact(t *testing.T) {
	t.Parallel()
	e := start(t, tinyG1(hostTier(8), diskTier(t.TempDir(), 24)), stories(t))
	start := e.EventSeq()
	for salt := range 8 {
		run(t, e, Request{Prompt: prompt(90, salt), Stop: StopParams{MaxTokens: 6, IgnoreEOS: true}})
	}
	waitFor(t, "offloads to finish", e.offloadsDone)
	dump := e.Dump()
	batches, err := e.journal.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	replayed := map[kvtier.Tier]map[uint64]bool{}
	for _, b := range batches {
		if b.Seq > dump.Seq {
			break
		}
		applyEvents(replayed, b.Events)
	}
	dumped := map[kvtier.Tier]map[uint64]bool{}
	applyEvents(dumped, dump.Events)
	for _, tier := range []kvtier.Tier{kvtier.Device, kvtier.Host, kvtier.Disk} {
		if !sameSet(replayed[tier], dumped[tier]) {
			t.Errorf("%s: replayed events hold %d blocks, the dump %d: they differ", tier, len(replayed[tier]), len(dumped[tier]))
		}
	}
	for _, lt := range e.tiers.list {
		own := map[uint64]bool{}
		for _, m := range lt.t.Blocks() {
			own[m.Hash] = true
		}
		if !sameSet(own, replayed[lt.t.Kind()]) {
			t.Errorf("%s: the tier holds %d blocks, its events say %d", lt.t.Kind(), len(own), len(replayed[lt.t.Kind()]))
		}
		if len(own) == 0 {
			t.Errorf("%s: nothing offloaded", lt.t.Kind())
		}
	}
}

func applyEvents(into map[kvtier.Tier]map[uint64]bool, events []kvevent.Event) {
	for _, ev := range events {
		if into[ev.Tier] == nil {
			into[ev.Tier] = map[uint64]bool{}
		}
		switch ev.Kind {
		case kvevent.Stored:
			for _, h := range ev.BlockHashes {
				into[ev.Tier][h] = true
			}
		case kvevent.Removed:
			for _, h := range ev.BlockHashes {
				delete(into[ev.Tier], h)
			}
		case kvevent.Cleared:
			clear(into)
		}
	}
}

func sameSet(a, b map[uint64]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// A disk tier reopened by a new engine serves what an earlier one wrote.
func TestTierDiskSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exec := stories(t)
	a := prompt(100, 7)
	req := Request{Prompt: a, Stop: StopParams{MaxTokens: 20, IgnoreEOS: true}}
	ref := run(t, start(t, Config{BlockSize: 16}, stories(t)), req)
	func() {
		e, err := New(tinyG1(diskTier(dir, 64)), exec, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		run(t, e, req)
		evictFromDevice(t, e, a)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	e := start(t, tinyG1(diskTier(dir, 64)), stories(t))
	got := run(t, e, req)
	if !sameTokens(got.tokens, ref.tokens) || got.final.Usage.CachedPromptTokens == 0 {
		t.Fatalf("after a restart: %v (cached %d), want %v from disk", got.tokens, got.final.Usage.CachedPromptTokens, ref.tokens)
	}
}

// Without KV bytes (a sim executor) tiers are refused with a clear error.
func TestTierNeedsKVBytes(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{Tiers: []TierConfig{hostTier(4)}}, backends()[1].new(t), nil); err == nil {
		t.Fatal("New with a tier and no KV bytes succeeded")
	}
}

// A block that rotted on disk is never served: onboarding stops at it,
// counts it, and the rest of the prompt is prefilled, with exact output.
func TestTierCorruptBlockRecomputed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exec := stories(t)
	a := prompt(100, 5)
	req := Request{Prompt: a, Stop: StopParams{MaxTokens: 20, IgnoreEOS: true}}
	ref := run(t, start(t, Config{BlockSize: 16}, stories(t)), req)
	e := start(t, tinyG1(diskTier(dir, 64)), exec)
	run(t, e, req)
	evictFromDevice(t, e, a)
	slabs, err := filepath.Glob(filepath.Join(dir, "kvbm-slab-*.kv"))
	if err != nil || len(slabs) != 1 {
		t.Fatalf("slab: %v %v", slabs, err)
	}
	b, err := os.ReadFile(slabs[0])
	if err != nil {
		t.Fatal(err)
	}
	// Rot a byte of every slot's data, past its 4 KiB header page, so
	// every header still checks out.
	slot := len(b) / 64
	for off := 4096 + 100; off < len(b); off += slot {
		b[off] ^= 0xff
	}
	if err := os.WriteFile(slabs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	got := run(t, e, req)
	if !sameTokens(got.tokens, ref.tokens) {
		t.Fatalf("with rotted blocks on disk: %v, want %v", got.tokens, ref.tokens)
	}
	if m := e.Metrics().Tiers[0]; m.Corrupt != 1 || m.Onboarded != 0 {
		t.Errorf("disk tier metrics %+v; want the one corrupt block read counted, none onboarded", m)
	}
}

// The shared object-store tier: a prompt one engine computed is onboarded
// by another engine serving the same model, byte-identical, from blocks
// the first wrote to the store.
func TestTierSharedAcrossEngines(t *testing.T) {
	t.Parallel()
	gw := deptest.StartVersityGW(t)
	raw := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(gw.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(gw.AccessKey, gw.SecretKey, "")})
	if _, err := raw.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("kv-shared")}); err != nil {
		t.Fatal(err)
	}
	shared := TierConfig{Open: func(bb int, on kvbm.OnChange) (kvbm.Tier, error) {
		return s3tier.Open(context.Background(), s3tier.Config{Endpoint: gw.Endpoint, Bucket: "kv-shared", AccessKey: gw.AccessKey, SecretKey: gw.SecretKey,
			Namespace: "stories260K", BlockSize: 16, BlockBytes: bb, Blocks: 1024, OnChange: on, Refresh: -1})
	}}
	a := prompt(120, 11)
	req := Request{Prompt: a, Stop: StopParams{MaxTokens: 24, IgnoreEOS: true}}
	ref := run(t, start(t, Config{BlockSize: 16}, stories(t)), req)
	writer := start(t, tinyG1(shared), stories(t))
	run(t, writer, req)
	waitFor(t, "offloads to the store", writer.offloadsDone)
	reader := start(t, tinyG1(shared), stories(t)) // lists the store at open
	got := run(t, reader, req)
	full := (len(a) - 1) / 16 * 16
	if !sameTokens(got.tokens, ref.tokens) || got.final.Usage.CachedPromptTokens != full {
		t.Fatalf("onboarded from the store another engine wrote: %v (cached %d), want %v (cached %d)", got.tokens, got.final.Usage.CachedPromptTokens, ref.tokens, full)
	}
	if n := onboarded(reader, kvtier.External); n != int64(full/16) {
		t.Errorf("%d blocks onboarded from the store; want %d", n, full/16)
	}
}

// Onboarding is planned again when a request reaches admission: a prompt
// queued behind another, before any tier held its prefix, loads
// the blocks another engine wrote to the shared store while it waited,
// byte-identical, with the whole prefix counted as cached.
func TestTierReplannedAtAdmission(t *testing.T) {
	t.Parallel()
	gw := deptest.StartVersityGW(t)
	raw := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(gw.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(gw.AccessKey, gw.SecretKey, "")})
	if _, err := raw.CreateBucket(t.Context(), &s3.CreateBucketInput{Bucket: aws.String("kv-replan")}); err != nil {
		t.Fatal(err)
	}
	var readerTier *s3tier.Tier
	shared := func(keep **s3tier.Tier) TierConfig {
		return TierConfig{Open: func(bb int, on kvbm.OnChange) (kvbm.Tier, error) {
			st, err := s3tier.Open(context.Background(), s3tier.Config{Endpoint: gw.Endpoint, Bucket: "kv-replan", AccessKey: gw.AccessKey, SecretKey: gw.SecretKey,
				Namespace: "stories260K", BlockSize: 16, BlockBytes: bb, Blocks: 1024, OnChange: on, Refresh: -1})
			if keep != nil {
				*keep = st
			}
			return st, err
		}}
	}
	a := prompt(120, 21)
	req := Request{Prompt: a, Stop: StopParams{MaxTokens: 16, IgnoreEOS: true}}
	ref := run(t, start(t, Config{BlockSize: 16}, stories(t)), req)

	cfg := tinyG1(shared(&readerTier))
	cfg.NumBlocks = 64
	reader := start(t, cfg, stories(t))
	// A head of the queue held in its place (as a prefix pull holds it)
	// keeps the request behind it waiting, first come, first served.
	hold := make(chan struct{})
	head, err := reader.Submit(t.Context(), Request{Prompt: prompt(20, 22), Stop: StopParams{MaxTokens: 4, IgnoreEOS: true}, Ready: hold})
	if err != nil {
		t.Fatal(err)
	}
	queued, err := reader.Submit(t.Context(), req) // nothing to onboard yet
	if err != nil {
		t.Fatal(err)
	}
	writer := start(t, tinyG1(shared(nil)), stories(t))
	run(t, writer, req)
	waitFor(t, "offloads to the store", writer.offloadsDone)
	if err := readerTier.Refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	close(hold)
	collect(t, head)
	got := collect(t, queued)
	full := (len(a) - 1) / 16 * 16
	if !sameTokens(got.tokens, ref.tokens) || got.final.Usage.CachedPromptTokens != full {
		t.Fatalf("queued request: %v (cached %d), want %v (cached %d)", got.tokens, got.final.Usage.CachedPromptTokens, ref.tokens, full)
	}
	reader.mu.Lock()
	replanned := reader.tiers.replanned
	reader.mu.Unlock()
	if replanned != 1 || onboarded(reader, kvtier.External) != int64(full/16) {
		t.Fatalf("replanned %d, onboarded %d from the store; want 1 and %d", replanned, onboarded(reader, kvtier.External), full/16)
	}
}
