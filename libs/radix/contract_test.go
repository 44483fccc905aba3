package radix

import (
	"errors"
	"maps"
	"testing"

	"switchyard.dev/libs/kvtier"
)

// seqHashes returns n chained-looking hashes starting at base.
func seqHashes(base uint64, n int) []uint64 {
	hs := make([]uint64, n)
	for i := range hs {
		hs[i] = base + uint64(i)
	}
	return hs
}

type depthMap = map[string][kvtier.Count]int

// TestContract is the behaviour suite of Index: each case runs steps
// against a fresh index and checks errors, Match depths and the Dump.
func TestContract(t *testing.T) {
	t.Parallel()
	dev, host, disk := kvtier.Device, kvtier.Host, kvtier.Disk
	type step struct {
		do      func(ix *Index) error
		wantErr error
	}
	add := func(names ...string) step {
		return step{do: func(ix *Index) error {
			for _, n := range names {
				if err := ix.AddWorker(n); err != nil {
					return err
				}
			}
			return nil
		}}
	}
	apply := func(name string, evs ...Event) step {
		return step{do: func(ix *Index) error { return ix.Apply(name, evs...) }}
	}
	batch := func(name string, seq uint64, wantErr error, evs ...Event) step {
		return step{do: func(ix *Index) error { return ix.ApplyBatch(name, seq, evs) }, wantErr: wantErr}
	}
	tests := []struct {
		name  string
		steps []step
		query []uint64
		want  depthMap
		next  map[string]uint64 // expected NextSeq per worker, if set
	}{
		{
			name:  "empty index matches nothing",
			query: []uint64{1, 2},
			want:  depthMap{},
		},
		{
			name:  "stored prefix",
			steps: []step{add("a"), apply("a", StoredEvent(dev, 1, 2, 3))},
			query: []uint64{1, 2, 3, 4},
			want:  depthMap{"a": {3, 3, 3, 3}},
		},
		{
			name:  "empty query",
			steps: []step{add("a"), apply("a", StoredEvent(dev, 1))},
			want:  depthMap{},
		},
		{
			name:  "stops at first block nobody holds",
			steps: []step{add("a"), apply("a", StoredEvent(dev, 1, 2, 4))},
			query: []uint64{1, 2, 3, 4},
			want:  depthMap{"a": {2, 2, 2, 2}},
		},
		{
			name:  "first block missing",
			steps: []step{add("a"), apply("a", StoredEvent(dev, 2, 3))},
			query: []uint64{1, 2, 3},
			want:  depthMap{},
		},
		{
			name: "workers with different depths",
			steps: []step{add("a", "b", "c"),
				apply("a", StoredEvent(dev, 1, 2, 3, 4)),
				apply("b", StoredEvent(dev, 1, 2)),
				apply("c", StoredEvent(dev, 2, 3, 4))},
			query: []uint64{1, 2, 3, 4},
			want:  depthMap{"a": {4, 4, 4, 4}, "b": {2, 2, 2, 2}},
		},
		{
			name: "tiers are cumulative",
			steps: []step{add("a"),
				apply("a", StoredEvent(dev, 1, 2), StoredEvent(host, 3), StoredEvent(disk, 4), StoredEvent(dev, 5))},
			query: []uint64{1, 2, 3, 4, 5},
			want:  depthMap{"a": {2, 3, 5, 5}},
		},
		{
			name:  "host-only first block",
			steps: []step{add("a"), apply("a", StoredEvent(host, 1, 2))},
			query: []uint64{1, 2},
			want:  depthMap{"a": {0, 2, 2, 2}},
		},
		{
			name: "removed from one tier keeps the other",
			steps: []step{add("a"),
				apply("a", StoredEvent(dev, 1, 2, 3), StoredEvent(host, 2), RemovedEvent(dev, 2))},
			query: []uint64{1, 2, 3},
			want:  depthMap{"a": {1, 3, 3, 3}},
		},
		{
			name: "removed block breaks the prefix",
			steps: []step{add("a", "b"),
				apply("a", StoredEvent(dev, 1, 2, 3), RemovedEvent(dev, 2)),
				apply("b", StoredEvent(dev, 1, 2))},
			query: []uint64{1, 2, 3},
			want:  depthMap{"a": {1, 1, 1, 1}, "b": {2, 2, 2, 2}},
		},
		{
			name:  "removing an absent block is a no-op",
			steps: []step{add("a"), apply("a", RemovedEvent(dev, 9), StoredEvent(dev, 1), RemovedEvent(host, 1))},
			query: []uint64{1},
			want:  depthMap{"a": {1, 1, 1, 1}},
		},
		{
			name: "cleared drops only that worker",
			steps: []step{add("a", "b"),
				apply("a", StoredEvent(dev, 1, 2), StoredEvent(host, 3)),
				apply("b", StoredEvent(dev, 1)),
				apply("a", ClearedEvent())},
			query: []uint64{1, 2, 3},
			want:  depthMap{"b": {1, 1, 1, 1}},
		},
		{
			name: "stored after cleared in one batch",
			steps: []step{add("a"),
				apply("a", StoredEvent(dev, 1, 2), ClearedEvent(), StoredEvent(dev, 1))},
			query: []uint64{1, 2},
			want:  depthMap{"a": {1, 1, 1, 1}},
		},
		{
			name: "sequence numbers advance per worker",
			steps: []step{add("a", "b"),
				batch("a", 0, nil, StoredEvent(dev, 1)),
				batch("a", 1, nil, StoredEvent(dev, 2)),
				batch("b", 0, nil, StoredEvent(dev, 1))},
			query: []uint64{1, 2},
			want:  depthMap{"a": {2, 2, 2, 2}, "b": {1, 1, 1, 1}},
			next:  map[string]uint64{"a": 2, "b": 1},
		},
		{
			name: "gap is detected and not applied",
			steps: []step{add("a"),
				batch("a", 0, nil, StoredEvent(dev, 1)),
				batch("a", 2, ErrSeqGap, StoredEvent(dev, 2))},
			query: []uint64{1, 2},
			want:  depthMap{"a": {1, 1, 1, 1}},
			next:  map[string]uint64{"a": 1},
		},
		{
			name: "replayed batch is stale",
			steps: []step{add("a"),
				batch("a", 0, nil, StoredEvent(dev, 1)),
				batch("a", 0, ErrSeqStale, StoredEvent(dev, 2))},
			query: []uint64{1, 2},
			want:  depthMap{"a": {1, 1, 1, 1}},
			next:  map[string]uint64{"a": 1},
		},
		{
			name: "resync replaces blocks and sequence",
			steps: []step{add("a"),
				batch("a", 0, nil, StoredEvent(dev, 1, 2, 3)),
				batch("a", 5, ErrSeqGap, StoredEvent(dev, 4)),
				{do: func(ix *Index) error {
					return ix.Resync("a", 9, []Block{{1, kvtier.Device.Mask()}, {7, kvtier.Host.Mask() | kvtier.Device.Mask()}})
				}},
				batch("a", 10, nil, StoredEvent(host, 8))},
			query: []uint64{1, 7, 8, 2},
			want:  depthMap{"a": {2, 3, 3, 3}},
			next:  map[string]uint64{"a": 11},
		},
		{
			name: "reset replaces blocks and forgets the sequence",
			steps: []step{add("a"),
				batch("a", 0, nil, StoredEvent(dev, 1, 2, 3)),
				{do: func(ix *Index) error { return ix.Reset("a", []Block{{7, kvtier.Device.Mask()}}) }},
				batch("a", 1, ErrSeqGap, StoredEvent(dev, 4)),
				apply("a", StoredEvent(dev, 8)), // the rest of the dump
				{do: func(ix *Index) error { return ix.Reset("zz", nil) }, wantErr: ErrUnknownWorker},
				{do: func(ix *Index) error { return ix.Reset("a", []Block{{1, 0}}) }, wantErr: ErrInvalidEvent}},
			query: []uint64{7, 8, 1},
			want:  depthMap{"a": {2, 2, 2, 2}},
			next:  map[string]uint64{"a": 0},
		},
		{
			name: "resume sets the sequence a complete dump reflects",
			steps: []step{add("a"),
				{do: func(ix *Index) error { return ix.Reset("a", []Block{{7, kvtier.Device.Mask()}}) }},
				apply("a", StoredEvent(dev, 8)),
				{do: func(ix *Index) error { return ix.Resume("a", 41) }},
				batch("a", 42, nil, StoredEvent(dev, 9)),
				{do: func(ix *Index) error { return ix.Resume("zz", 1) }, wantErr: ErrUnknownWorker}},
			query: []uint64{7, 8, 9},
			want:  depthMap{"a": {3, 3, 3, 3}},
			next:  map[string]uint64{"a": 43},
		},
		{
			name: "removed worker is forgotten",
			steps: []step{add("a", "b"),
				apply("a", StoredEvent(dev, 1, 2)),
				apply("b", StoredEvent(dev, 1)),
				{do: func(ix *Index) error { return ix.RemoveWorker("a") }},
				{do: func(ix *Index) error { return ix.Apply("a", StoredEvent(dev, 1)) }, wantErr: ErrUnknownWorker},
				{do: func(ix *Index) error { return ix.RemoveWorker("a") }, wantErr: ErrUnknownWorker},
				batch("a", 0, ErrUnknownWorker)},
			query: []uint64{1, 2},
			want:  depthMap{"b": {1, 1, 1, 1}},
		},
		{
			name: "recycled id does not inherit blocks",
			steps: []step{add("a"),
				apply("a", StoredEvent(dev, 1, 2)),
				{do: func(ix *Index) error { return ix.RemoveWorker("a") }},
				add("c"),
				apply("c", StoredEvent(host, 1))},
			query: []uint64{1, 2},
			want:  depthMap{"c": {0, 1, 1, 1}},
		},
		{
			name: "unknown and duplicate workers",
			steps: []step{add("a"),
				{do: func(ix *Index) error { return ix.AddWorker("a") }, wantErr: ErrWorkerExists},
				{do: func(ix *Index) error { return ix.AddWorker("") }, wantErr: ErrInvalidWorker},
				{do: func(ix *Index) error { return ix.Apply("zz", StoredEvent(dev, 1)) }, wantErr: ErrUnknownWorker},
				{do: func(ix *Index) error { return ix.Resync("zz", 1, nil) }, wantErr: ErrUnknownWorker}},
			query: []uint64{1},
			want:  depthMap{},
		},
		{
			name: "invalid event rejects the whole batch",
			steps: []step{add("a"),
				batch("a", 0, ErrInvalidEvent, StoredEvent(dev, 1), StoredEvent(kvtier.Tier(7), 2)),
				batch("a", 0, ErrInvalidEvent, Event{Kind: 0}),
				{do: func(ix *Index) error { return ix.Resync("a", 0, []Block{{1, 0}}) }, wantErr: ErrInvalidEvent}},
			query: []uint64{1},
			want:  depthMap{},
			next:  map[string]uint64{"a": 0},
		},
		{
			name:  "hash zero is an ordinary block",
			steps: []step{add("a"), apply("a", StoredEvent(dev, 0, 1))},
			query: []uint64{0, 1},
			want:  depthMap{"a": {2, 2, 2, 2}},
		},
		{
			name: "widely shared blocks use bitmaps",
			steps: func() []step {
				steps := []step{}
				for i := range 40 {
					name := string(rune('A' + i))
					steps = append(steps, add(name), apply(name, StoredEvent(dev, seqHashes(1, 1+i%5)...)))
					if i%7 == 0 {
						steps = append(steps, apply(name, StoredEvent(host, seqHashes(1+uint64(i%5), 3)...)))
					}
				}
				return steps
			}(),
			query: seqHashes(1, 8),
			want: func() depthMap {
				m := depthMap{}
				for i := range 40 {
					d := 1 + i%5
					e := d
					if i%7 == 0 {
						e = i%5 + 3
					}
					m[string(rune('A'+i))] = [kvtier.Count]int{d, e, e, e}
				}
				return m
			}(),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ix := New()
			for i, s := range tc.steps {
				err := s.do(ix)
				if !errors.Is(err, s.wantErr) || (err != nil) != (s.wantErr != nil) {
					t.Fatalf("step %d: err %v, want %v", i, err, s.wantErr)
				}
			}
			r := ix.Match(tc.query)
			if got := depths(r); !maps.Equal(got, tc.want) {
				t.Fatalf("Match(%v):\n got  %v\n want %v", tc.query, got, tc.want)
			}
			for name, want := range tc.next {
				if got, err := ix.NextSeq(name); err != nil || got != want {
					t.Fatalf("NextSeq(%q) = %d, %v; want %d", name, got, err, want)
				}
			}
			// The dump must agree with the matches, and survive a round trip.
			back, err := Restore(ix.Snapshot())
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if !back.Equal(ix) {
				t.Fatalf("restored index differs:\n got  %v\n want %v", back.Dump(), ix.Dump())
			}
			if got := depths(back.Match(tc.query)); !maps.Equal(got, tc.want) {
				t.Fatalf("restored Match = %v, want %v", got, tc.want)
			}
		})
	}
}
