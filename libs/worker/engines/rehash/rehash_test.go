package rehash

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/vllmevents"
)

const bs = 4

// seqTokens returns n blocks of tokens starting at from.
func seqTokens(n int, from uint32) []uint32 {
	out := make([]uint32, n*bs)
	for i := range out {
		out[i] = from + uint32(i)
	}
	return out
}

func st(hashes []uint64, parent uint64, hasParent bool, tokens []uint32, mod ...func(*vllmevents.Stored)) vllmevents.Event {
	s := vllmevents.Stored{Hashes: hashes, Parent: parent, HasParent: hasParent, TokenIDs: tokens, BlockSize: bs}
	for _, m := range mod {
		m(&s)
	}
	return vllmevents.Event{Kind: vllmevents.KindStored, Stored: s}
}

func rm(tier kvtier.Tier, hashes ...uint64) vllmevents.Event {
	return vllmevents.Event{Kind: vllmevents.KindRemoved, Removed: vllmevents.Removed{Hashes: hashes, Tier: tier}}
}

func batch(evs ...vllmevents.Event) *vllmevents.Batch { return &vllmevents.Batch{Events: evs} }

func TestHandleBatch(t *testing.T) {
	t.Parallel()
	tokA := seqTokens(2, 100)
	a := kvhash.BlockHashes(tokA, bs, 0)
	tokB := seqTokens(1, 900)
	b1 := kvhash.Chain(a[1], tokB, 0) // B continues A's chain
	host := func(s *vllmevents.Stored) { s.Tier = kvtier.Host }
	stored := func(h, parent uint64, tokens []uint32, tier kvtier.Tier) block {
		return block{kvevent.Stored, h, parent, tokens, tier}
	}
	removed := func(tier kvtier.Tier, h uint64) block { return block{kind: kvevent.Removed, hash: h, tier: tier} }
	tests := []struct {
		name    string
		batches []*vllmevents.Batch
		want    [][]block // what each batch republishes
		dump    []block
		stats   Stats
	}{
		{
			name:    "a removed event removes what its stored event added",
			batches: []*vllmevents.Batch{batch(st([]uint64{11, 12}, 0, false, tokA)), batch(rm(kvtier.Device, 12, 11))},
			want: [][]block{
				{stored(a[0], kvhash.Root, tokA[:bs], kvtier.Device), stored(a[1], a[0], tokA[bs:], kvtier.Device)},
				{removed(kvtier.Device, a[1]), removed(kvtier.Device, a[0])},
			},
			stats: Stats{Batches: 2, StoredBlocks: 2, RemovedBlocks: 2},
		},
		{
			name: "a child is chained on its parent's re-hashed name",
			batches: []*vllmevents.Batch{batch(st([]uint64{11, 12}, 0, false, tokA)),
				batch(st([]uint64{13}, 12, true, tokB))},
			want: [][]block{
				{stored(a[0], kvhash.Root, tokA[:bs], kvtier.Device), stored(a[1], a[0], tokA[bs:], kvtier.Device)},
				{stored(b1, a[1], tokB, kvtier.Device)},
			},
			dump:  []block{stored(a[0], kvhash.Root, tokA[:bs], kvtier.Device), stored(a[1], a[0], tokA[bs:], kvtier.Device), stored(b1, a[1], tokB, kvtier.Device)},
			stats: Stats{Batches: 2, StoredBlocks: 3},
		},
		{
			name:    "unknown parent dropped",
			batches: []*vllmevents.Batch{batch(st([]uint64{13}, 99, true, tokB))},
			want:    [][]block{nil},
			stats:   Stats{Batches: 1, UnknownParent: 1},
		},
		{
			name: "LoRA, extra keys and a wrong token count are dropped",
			batches: []*vllmevents.Batch{batch(
				st([]uint64{11}, 0, false, tokA[:bs], func(s *vllmevents.Stored) { s.LoraID, s.HasLoraID = 3, true }),
				st([]uint64{11}, 0, false, tokA[:bs], func(s *vllmevents.Stored) { s.LoraName = "adapter" }),
				st([]uint64{11}, 0, false, tokA[:bs], func(s *vllmevents.Stored) { s.HasExtraKeys = true }),
				st([]uint64{11, 12}, 0, false, tokA[:bs]),
				rm(kvtier.Device, 11),
			)},
			want:  [][]block{nil},
			stats: Stats{Batches: 1, LoRA: 2, ExtraKeys: 1, Malformed: 1, UnknownRemoved: 1},
		},
		{
			name: "a page stored twice is removed with its last store",
			batches: []*vllmevents.Batch{
				batch(st([]uint64{11}, 0, false, tokA[:bs]), st([]uint64{11}, 0, false, tokA[:bs])),
				batch(rm(kvtier.Device, 11)),
				batch(rm(kvtier.Device, 11)),
			},
			want:  [][]block{{stored(a[0], kvhash.Root, tokA[:bs], kvtier.Device)}, nil, {removed(kvtier.Device, a[0])}},
			stats: Stats{Batches: 3, StoredBlocks: 2, RemovedBlocks: 2},
		},
		{
			name: "tiers are kept apart",
			batches: []*vllmevents.Batch{
				batch(st([]uint64{11}, 0, false, tokA[:bs]), st([]uint64{11}, 0, false, tokA[:bs], host)),
				batch(rm(kvtier.Host, 11)),
			},
			want: [][]block{
				{stored(a[0], kvhash.Root, tokA[:bs], kvtier.Device), stored(a[0], kvhash.Root, tokA[:bs], kvtier.Host)},
				{removed(kvtier.Host, a[0])},
			},
			dump:  []block{stored(a[0], kvhash.Root, tokA[:bs], kvtier.Device)},
			stats: Stats{Batches: 2, StoredBlocks: 2, RemovedBlocks: 1},
		},
		{
			name: "a chain partly cached already announces only the rest",
			batches: []*vllmevents.Batch{
				batch(st([]uint64{11}, 0, false, tokA[:bs])),
				batch(st([]uint64{21, 22}, 0, false, tokA)), // the same tokens under other engine names
			},
			want: [][]block{
				{stored(a[0], kvhash.Root, tokA[:bs], kvtier.Device)},
				{stored(a[1], a[0], tokA[bs:], kvtier.Device)},
			},
			dump:  []block{stored(a[0], kvhash.Root, tokA[:bs], kvtier.Device), stored(a[1], a[0], tokA[bs:], kvtier.Device)},
			stats: Stats{Batches: 2, StoredBlocks: 3},
		},
		{
			name: "an engine name reused for other tokens replaces the old block",
			batches: []*vllmevents.Batch{
				batch(st([]uint64{11}, 0, false, tokA[:bs])),
				batch(st([]uint64{11}, 0, false, tokB)),
			},
			want: [][]block{
				{stored(a[0], kvhash.Root, tokA[:bs], kvtier.Device)},
				{removed(kvtier.Device, a[0]), stored(kvhash.Chain(kvhash.Root, tokB, 0), kvhash.Root, tokB, kvtier.Device)},
			},
			dump:  []block{stored(kvhash.Chain(kvhash.Root, tokB, 0), kvhash.Root, tokB, kvtier.Device)},
			stats: Stats{Batches: 2, StoredBlocks: 2},
		},
		{
			name: "cleared",
			batches: []*vllmevents.Batch{
				batch(st([]uint64{11}, 0, false, tokA[:bs])),
				batch(vllmevents.Event{Kind: vllmevents.KindCleared}, st([]uint64{12}, 11, true, tokA[bs:])),
			},
			want:  [][]block{{stored(a[0], kvhash.Root, tokA[:bs], kvtier.Device)}, {{kind: kvevent.Cleared}}},
			stats: Stats{Batches: 2, StoredBlocks: 1, UnknownParent: 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newRehasher(t, bs)
			for i, b := range tt.batches {
				if got := flatten(apply(t, r, uint64(i), b)); !reflect.DeepEqual(got, tt.want[i]) {
					t.Errorf("batch %d republished\n %+v\nwant\n %+v", i, got, tt.want[i])
				}
			}
			checkDump(t, r, tt.dump)
			if got := r.Stats(); got != tt.stats {
				t.Errorf("stats %+v; want %+v", got, tt.stats)
			}
			if r.Blocks() != len(tt.dump) {
				t.Errorf("%d blocks held; dump has %d", r.Blocks(), len(tt.dump))
			}
		})
	}
}

// A gap clears everything (Cleared in the journal); the state rebuilds
// from what follows: children of blocks from before the gap are dropped,
// new sequences are re-hashed.
func TestGapResyncs(t *testing.T) {
	t.Parallel()
	r := newRehasher(t, bs)
	tok := seqTokens(2, 7)
	apply(t, r, 0, batch(st([]uint64{11}, 0, false, tok[:bs])))
	before := r.EventSeq()
	if err := r.HandleGap(vllmevents.Gap{From: 1, To: 5}); err != nil {
		t.Fatal(err)
	}
	if got := flatten(appended(t, r, before)); !reflect.DeepEqual(got, []block{{kind: kvevent.Cleared}}) {
		t.Fatalf("gap republished %+v; want one Cleared", got)
	}
	if r.Blocks() != 0 {
		t.Fatalf("%d blocks held after the gap", r.Blocks())
	}
	got := flatten(apply(t, r, 5, batch(st([]uint64{12}, 11, true, tok[bs:]), st([]uint64{21}, 0, false, tok[:bs]))))
	h := kvhash.Chain(kvhash.Root, tok[:bs], 0)
	if want := []block{{kvevent.Stored, h, kvhash.Root, tok[:bs], kvtier.Device}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after the gap republished %+v; want %+v", got, want)
	}
	if st := r.Stats(); st.Resyncs != 1 || st.UnknownParent != 1 {
		t.Fatalf("stats %+v; want 1 resync, 1 unknown parent", st)
	}
	// A second gap while empty announces nothing.
	apply(t, r, 6, batch(rm(kvtier.Device, 21)))
	before = r.EventSeq()
	if err := r.HandleGap(vllmevents.Gap{From: 7, To: 0, Restart: true}); err != nil {
		t.Fatal(err)
	}
	if r.EventSeq() != before {
		t.Fatal("a gap with nothing held appended a batch")
	}
}

func TestBlockSizeRefused(t *testing.T) {
	t.Parallel()
	r := newRehasher(t, bs)
	apply(t, r, 0, batch(st([]uint64{11}, 0, false, seqTokens(1, 0))))
	before := r.EventSeq()
	wrong := st([]uint64{12}, 0, false, seqTokens(2, 0), func(s *vllmevents.Stored) { s.BlockSize = 2 * bs })
	err := r.HandleBatch(1, batch(st([]uint64{13}, 0, false, seqTokens(1, 50)), wrong))
	if !errors.Is(err, ErrBlockSize) {
		t.Fatalf("HandleBatch = %v; want ErrBlockSize", err)
	}
	if got := flatten(appended(t, r, before)); !reflect.DeepEqual(got, []block{{kind: kvevent.Cleared}}) {
		t.Fatalf("refusal republished %+v; want one Cleared", got)
	}
	if st := r.Stats(); st.BlockSizeDiffs != 1 || r.Blocks() != 0 {
		t.Fatalf("stats %+v, %d blocks", st, r.Blocks())
	}
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	for _, cfg := range []Config{{}, {BlockSize: -1}, {BlockSize: 16, EventBuffer: -1}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) succeeded", cfg)
		}
	}
}

func TestFollowReplaysFromTheStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		in   vllmevents.Config
		want vllmevents.Config
	}{
		{"replay socket", vllmevents.Config{Endpoint: "tcp://e:5557", ReplayEndpoint: "tcp://e:5558"},
			vllmevents.Config{Endpoint: "tcp://e:5557", ReplayEndpoint: "tcp://e:5558", Resume: true}},
		{"no replay socket", vllmevents.Config{Endpoint: "tcp://e:5557"}, vllmevents.Config{Endpoint: "tcp://e:5557"}},
		{"own position", vllmevents.Config{Endpoint: "tcp://e:5557", ReplayEndpoint: "tcp://e:5558", Resume: true, ResumeFrom: 9},
			vllmevents.Config{Endpoint: "tcp://e:5557", ReplayEndpoint: "tcp://e:5558", Resume: true, ResumeFrom: 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newRehasher(t, bs)
			stop := errors.New("stop")
			r.subscribe = func(_ context.Context, cfg vllmevents.Config, h vllmevents.Handler) error {
				if cfg.Logger == nil || h != r {
					t.Errorf("subscribed with logger %v, handler %v", cfg.Logger, h)
				}
				cfg.Logger = nil
				if cfg != tc.want {
					t.Errorf("subscribed with %+v; want %+v", cfg, tc.want)
				}
				return stop
			}
			if err := r.Follow(t.Context(), tc.in); !errors.Is(err, stop) {
				t.Errorf("Follow = %v", err)
			}
		})
	}
}

func FuzzHandleBatch(f *testing.F) {
	for _, engine := range []string{"vllm-array", "vllm-map", "sglang"} {
		for _, p := range loadRecording(f, engine) {
			f.Add(p)
		}
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		b, err := vllmevents.DecodeBatch(payload)
		if err != nil {
			return
		}
		r := newRehasher(t, 16)
		for range 2 { // twice: duplicates and removals of what it stored
			if err := r.HandleBatch(0, b); err != nil && !errors.Is(err, ErrBlockSize) {
				t.Fatal(err)
			}
		}
		seen := map[uint64]bool{}
		for _, e := range r.Dump().Events {
			seen[e.BlockHashes[0]] = true
		}
		if len(seen) != r.Blocks() {
			t.Fatalf("dump names %d blocks, %d held", len(seen), r.Blocks())
		}
	})
}

func BenchmarkHandleBatch(b *testing.B) {
	r := newRehasher(b, 16)
	tokens := seqTokens(16, 0) // 64 tokens: four blocks of 16
	stored := &vllmevents.Batch{Events: []vllmevents.Event{{Kind: vllmevents.KindStored,
		Stored: vllmevents.Stored{Hashes: []uint64{1, 2, 3, 4}, TokenIDs: tokens, BlockSize: 16}}}}
	removed := batch(rm(kvtier.Device, 4, 3, 2, 1))
	b.ReportAllocs()
	for i := range b.N {
		if err := r.HandleBatch(uint64(2*i), stored); err != nil {
			b.Fatal(err)
		}
		if err := r.HandleBatch(uint64(2*i+1), removed); err != nil {
			b.Fatal(err)
		}
	}
}
