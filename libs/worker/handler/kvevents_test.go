package handler_test

import (
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	commonv1 "switchyard.dev/gen/switchyard/common/v1"
	workerv1 "switchyard.dev/gen/switchyard/worker/v1"
	"switchyard.dev/libs/engine"
	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/worker/handler"
)

func TestEventConversion(t *testing.T) {
	t.Parallel()
	parent := uint64(7)
	for _, tc := range []struct {
		name string
		in   kvevent.Event
		want *workerv1.KvEvent
	}{
		{"stored root", kvevent.Event{Kind: kvevent.Stored, BlockHashes: []uint64{1, 2}, TokenIDs: []uint32{5, 6, 7, 8}, BlockSize: 2, Tier: kvtier.Device},
			&workerv1.KvEvent{Event: &workerv1.KvEvent_Stored{Stored: &workerv1.KvBlocksStored{BlockHashes: []uint64{1, 2}, TokenIds: []uint32{5, 6, 7, 8}, BlockSize: 2, Tier: commonv1.StorageTier_STORAGE_TIER_DEVICE}}}},
		{"stored child", kvevent.Event{Kind: kvevent.Stored, BlockHashes: []uint64{3}, ParentHash: 7, TokenIDs: []uint32{1, 2}, BlockSize: 2, Tier: kvtier.Host},
			&workerv1.KvEvent{Event: &workerv1.KvEvent_Stored{Stored: &workerv1.KvBlocksStored{BlockHashes: []uint64{3}, ParentHash: &parent, TokenIds: []uint32{1, 2}, BlockSize: 2, Tier: commonv1.StorageTier_STORAGE_TIER_HOST}}}},
		{"removed", kvevent.Event{Kind: kvevent.Removed, BlockHashes: []uint64{9}, Tier: kvtier.Tier(kvtier.Count)},
			&workerv1.KvEvent{Event: &workerv1.KvEvent_Removed{Removed: &workerv1.KvBlocksRemoved{BlockHashes: []uint64{9}}}}},
		{"cleared", kvevent.Event{Kind: kvevent.Cleared}, &workerv1.KvEvent{Event: &workerv1.KvEvent_Cleared{Cleared: &workerv1.KvCleared{}}}},
		{"unknown kind", kvevent.Event{Kind: 99}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := handler.Event(&tc.in)
			if (got == nil) != (tc.want == nil) || (got != nil && !proto.Equal(got, tc.want)) {
				t.Fatalf("Event(%+v) = %v; want %v", tc.in, got, tc.want)
			}
			// Without tokens: the same events, Stored ones without token ids.
			want := []*workerv1.KvEvent{}
			if tc.want != nil {
				w := proto.Clone(tc.want).(*workerv1.KvEvent)
				if st := w.GetStored(); st != nil {
					st.TokenIds = nil
				}
				want = append(want, w)
			}
			if got := handler.Events([]kvevent.Event{tc.in}, false); len(got) != len(want) || (len(got) == 1 && !proto.Equal(got[0], want[0])) {
				t.Fatalf("Events(%+v, no tokens) = %v; want %v", tc.in, got, want)
			}
		})
	}
}

// Every defined tier has its own wire enum value; an undefined one is
// unspecified.
func TestTierConversion(t *testing.T) {
	t.Parallel()
	seen := map[commonv1.StorageTier]kvtier.Tier{}
	for tier := range kvtier.Tier(kvtier.Count) {
		got := handler.Tier(tier)
		if prev, dup := seen[got]; dup {
			t.Errorf("Tier(%v) = %v, as for %v", tier, got, prev)
		}
		if got == commonv1.StorageTier_STORAGE_TIER_UNSPECIFIED {
			t.Errorf("Tier(%v) is unspecified", tier)
		}
		seen[got] = tier
	}
	if got := handler.Tier(kvtier.Tier(kvtier.Count)); got != commonv1.StorageTier_STORAGE_TIER_UNSPECIFIED {
		t.Errorf("Tier(undefined) = %v; want unspecified", got)
	}
}

// omit_token_ids: the dump and live Stored events carry the same hashes
// without the token ids.
func TestSubscribeKvEventsOmitsTokenIDs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, engine.Config{BlockSize: 16, EventBuffer: 16})
	fill(t, f, 2)
	recv := func(omit bool) (dump, live *workerv1.SubscribeKvEventsResponse) {
		st, err := f.client.SubscribeKvEvents(t.Context(), connect.NewRequest(&workerv1.SubscribeKvEventsRequest{Dump: true, OmitTokenIds: omit}))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if !st.Receive() {
			t.Fatal(st.Err())
		}
		dump = st.Msg()
		// A resumed stream, for live batches both subscribers see alike.
		res, err := f.client.SubscribeKvEvents(t.Context(), connect.NewRequest(&workerv1.SubscribeKvEventsRequest{AfterSequence: dump.GetSequence() - 1, OmitTokenIds: omit}))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Close()
		if !res.Receive() {
			t.Fatal(res.Err())
		}
		return dump, res.Msg()
	}
	dumpAll, liveAll := recv(false)
	dumpOmit, liveOmit := recv(true)
	for _, tc := range []struct {
		name      string
		all, omit *workerv1.SubscribeKvEventsResponse
	}{{"dump", dumpAll, dumpOmit}, {"live", liveAll, liveOmit}} {
		if len(tc.all.GetEvents()) == 0 || len(tc.all.GetEvents()) != len(tc.omit.GetEvents()) {
			t.Fatalf("%s: %d and %d events; want the same, some", tc.name, len(tc.all.GetEvents()), len(tc.omit.GetEvents()))
		}
		stored := 0
		for i, e := range tc.all.GetEvents() {
			want := proto.Clone(e).(*workerv1.KvEvent)
			if st := want.GetStored(); st != nil {
				if len(st.GetTokenIds()) == 0 {
					t.Errorf("%s event %d: no token ids without omit_token_ids", tc.name, i)
				}
				st.TokenIds = nil
				stored++
			}
			if got := tc.omit.GetEvents()[i]; !proto.Equal(got, want) {
				t.Errorf("%s event %d with omit_token_ids: %v; want %v", tc.name, i, got, want)
			}
		}
		if stored == 0 {
			t.Errorf("%s: no Stored events to compare", tc.name)
		}
	}
}

// fill runs distinct prompts until the journal holds at least n more
// batches.
func fill(t *testing.T, f *fixture, n uint64) {
	t.Helper()
	until := f.eng.EventSeq() + n
	for i := uint32(0); f.eng.EventSeq() < until; i++ {
		if _, _, err := generate(t, f.client, genReq(prompt(20, 3+i), 2)); err != nil {
			t.Fatal(err)
		}
	}
}

// A dump then live batches; resuming after a sequence replays only later
// batches; a position off the buffer or ahead of it is OutOfRange.
func TestSubscribeKvEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, engine.Config{BlockSize: 16, EventBuffer: 4})
	fill(t, f, 2)
	dump := f.eng.Dump()
	dumpSeq := dump.Seq

	st, err := f.client.SubscribeKvEvents(t.Context(), connect.NewRequest(&workerv1.SubscribeKvEventsRequest{Dump: true, AfterSequence: 1}))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if !st.Receive() {
		t.Fatal(st.Err())
	}
	if got := st.Msg(); !got.GetDump() || !got.GetDumpComplete() || got.GetSequence() != dumpSeq || len(got.GetEvents()) != len(dump.Events) || len(dump.Events) < 2 {
		t.Fatalf("first message %v; want the whole dump at %d with the %d cached blocks, marked complete", got, dumpSeq, len(dump.Events))
	}
	// The next batch is live: produced after subscribing.
	errc := make(chan error, 1)
	go func() {
		_, _, err := generate(t, f.client, genReq(prompt(20, 100), 2))
		errc <- err
	}()
	if !st.Receive() {
		t.Fatal(st.Err())
	}
	if got := st.Msg(); got.GetDump() || got.GetSequence() != dumpSeq+1 || len(got.GetEvents()) == 0 {
		t.Fatalf("live message %v; want sequence %d with events", got, dumpSeq+1)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}

	// Resume after dumpSeq: the first message is dumpSeq+1, nothing older.
	resume, err := f.client.SubscribeKvEvents(t.Context(), connect.NewRequest(&workerv1.SubscribeKvEventsRequest{AfterSequence: dumpSeq}))
	if err != nil {
		t.Fatal(err)
	}
	defer resume.Close()
	if !resume.Receive() || resume.Msg().GetSequence() != dumpSeq+1 {
		t.Fatalf("resumed at %v (err %v); want sequence %d", resume.Msg(), resume.Err(), dumpSeq+1)
	}

	fill(t, f, 6) // dumpSeq+1 falls out of the 4-batch buffer
	last := f.eng.EventSeq()
	for _, tc := range []struct {
		name  string
		after uint64
		msg   string
	}{
		{"dropped", dumpSeq, "dump=true"},
		{"ahead", last + 1, "ahead of this worker's latest batch"},
		// Positions an earlier run of the worker handed out: its runs
		// start at random sequence numbers, so they lie below this run's
		// start or above its latest batch.
		{"earlier run, below", 1, "dump=true"},
		{"earlier run, above", 1<<62 + 5, "ahead of this worker's latest batch"},
	} {
		gap, err := f.client.SubscribeKvEvents(t.Context(), connect.NewRequest(&workerv1.SubscribeKvEventsRequest{AfterSequence: tc.after}))
		if err != nil {
			t.Fatal(err)
		}
		for gap.Receive() {
			t.Fatalf("%s: got %v; want OutOfRange", tc.name, gap.Msg())
		}
		assertCode(t, gap.Err(), connect.CodeOutOfRange, tc.msg)
		gap.Close()
	}
}
