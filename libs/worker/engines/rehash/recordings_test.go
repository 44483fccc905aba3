package rehash

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"switchyard.dev/libs/engine/kvevent"
	"switchyard.dev/libs/kvhash"
	"switchyard.dev/libs/kvtier"
	"switchyard.dev/libs/vllmevents"
)

// The recordings (libs/vllmevents/testdata/recordings, made by that
// package's TestRecordings) are one engine history as vLLM's two
// encodings and SGLang publish it; requests.json holds the token ids.
const recordings = "../../../vllmevents/testdata/recordings"

type requests struct {
	BlockSize int                 `json:"block_size"`
	Requests  map[string][]uint32 `json:"requests"`
}

func loadRequests(t testing.TB) requests {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(recordings, "requests.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r requests
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// loadRecording returns an engine's payloads in sequence order.
func loadRecording(t testing.TB, engine string) [][]byte {
	t.Helper()
	var out [][]byte
	for seq := 0; ; seq++ {
		data, err := os.ReadFile(filepath.Join(recordings, engine, fmt.Sprintf("%04d.msgpack", seq)))
		if os.IsNotExist(err) && seq > 0 {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
}

// block is one block of a journal event, flattened: engine-neutral, since
// vLLM stores a chain in one event and SGLang one page per event.
type block struct {
	kind   kvevent.Kind
	hash   uint64
	parent uint64
	tokens []uint32
	tier   kvtier.Tier
}

func flatten(evs []kvevent.Event) []block {
	var out []block
	for _, e := range evs {
		switch e.Kind {
		case kvevent.Stored:
			parent := e.ParentHash
			for i, h := range e.BlockHashes {
				out = append(out, block{kvevent.Stored, h, parent, e.TokenIDs[i*e.BlockSize : (i+1)*e.BlockSize], e.Tier})
				parent = h
			}
		case kvevent.Removed:
			for _, h := range e.BlockHashes {
				out = append(out, block{kind: kvevent.Removed, hash: h, tier: e.Tier})
			}
		default:
			out = append(out, block{kind: e.Kind})
		}
	}
	return out
}

// The recorded events of every engine re-hash to exactly the chains the
// router computes for the requests' tokens (route.Decide:
// kvhash.AppendBlockHashes from kvhash.Root, the pool's block size, salt
// 0), and removals remove exactly what the stores added.
func TestRecordingsRehashToRouterChains(t *testing.T) {
	t.Parallel()
	reqs := loadRequests(t)
	bs := reqs.BlockSize
	chain := map[string][]uint64{}
	for name, tokens := range reqs.Requests {
		chain[name] = kvhash.AppendBlockHashes(nil, kvhash.Root, tokens, bs, 0)
	}
	tok := func(req string, i int) []uint32 { return reqs.Requests[req][i*bs : (i+1)*bs] }
	stored := func(req string, i int) block {
		parent := kvhash.Root
		if i > 0 {
			parent = chain[req][i-1]
		}
		return block{kvevent.Stored, chain[req][i], parent, tok(req, i), kvtier.Device}
	}
	removed := func(req string, i int) block {
		return block{kind: kvevent.Removed, hash: chain[req][i], tier: kvtier.Device}
	}
	for _, tc := range []struct {
		engine string
		lora   bool // the engine says which blocks are a LoRA adapter's
	}{{"vllm-array", true}, {"vllm-map", true}, {"sglang", false}} {
		t.Run(tc.engine, func(t *testing.T) {
			t.Parallel()
			loraStep := []block(nil)
			if !tc.lora {
				loraStep = []block{stored("D", 0)}
			}
			want := [][]block{
				{stored("A", 0), stored("A", 1)},
				{stored("B", 1), stored("B", 2)}, // B's first block is A's
				{stored("A", 2)},                 // decoded tokens filled a block
				{removed("A", 2), removed("A", 1)},
				loraStep, // C's parent was never seen; D is a LoRA's
				{{kind: kvevent.Cleared}, stored("F", 0), stored("F", 1)},
			}
			r := newRehasher(t, bs)
			for seq, payload := range loadRecording(t, tc.engine) {
				b, err := vllmevents.DecodeBatch(payload)
				if err != nil {
					t.Fatal(err)
				}
				got := apply(t, r, uint64(seq), b)
				if !reflect.DeepEqual(flatten(got), want[seq]) {
					t.Errorf("engine batch %d republished\n %+v\nwant\n %+v", seq, flatten(got), want[seq])
				}
				if seq == 3 {
					checkDump(t, r, []block{stored("A", 0), stored("B", 1), stored("B", 2)})
				}
			}
			st := r.Stats()
			wantLoRA := uint64(0)
			if tc.lora {
				wantLoRA = 1
			}
			if st.UnknownParent != 1 || st.LoRA != wantLoRA || st.RemovedBlocks != 2 || st.UnknownRemoved != 0 {
				t.Errorf("stats %+v; want 1 unknown parent, %d LoRA, 2 removed", st, wantLoRA)
			}
			checkDump(t, r, []block{stored("F", 0), stored("F", 1)})
		})
	}
}

// apply hands b to r and returns the journal batch it appended (nil when
// it appended none).
func apply(t *testing.T, r *Rehasher, seq uint64, b *vllmevents.Batch) []kvevent.Event {
	t.Helper()
	before := r.EventSeq()
	if err := r.HandleBatch(seq, b); err != nil {
		t.Fatal(err)
	}
	return appended(t, r, before)
}

func appended(t *testing.T, r *Rehasher, before uint64) []kvevent.Event {
	t.Helper()
	switch r.EventSeq() {
	case before:
		return nil
	case before + 1:
		got, err := r.Subscribe(before).Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return got.Events
	}
	t.Fatalf("journal advanced from %d to %d; want one batch", before, r.EventSeq())
	return nil
}

// checkDump checks r's dump and that subscribing after its sequence
// continues gap-free (nothing pending).
func checkDump(t *testing.T, r *Rehasher, want []block) {
	t.Helper()
	d := r.Dump()
	if got := flatten(d.Events); !reflect.DeepEqual(got, want) {
		t.Errorf("dump\n %+v\nwant\n %+v", got, want)
	}
	if d.Seq != r.EventSeq() {
		t.Errorf("dump at %d, journal at %d", d.Seq, r.EventSeq())
	}
}

func newRehasher(t testing.TB, bs int) *Rehasher {
	t.Helper()
	r, err := New(Config{BlockSize: bs})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
