package vllmevents

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// Recordings: the same engine history (two requests sharing a prefix, a
// decode step filling a block, evictions, an event whose parent the
// subscriber never saw, a LoRA block, a cache reset) as three engines
// publish it, one payload per sequence number in
// testdata/recordings/<engine>/<seq>.msgpack, with the requests' token ids
// in testdata/recordings/requests.json. They are constructed, not captured
// from live engines (none can run here), with the encodings each engine's
// msgspec structs produce:
//
//   - vllm-array: vLLM up to 0.10 (array_like batch and tagged-array
//     events, integer hashes as with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1,
//     data_parallel_rank last);
//   - vllm-map: newer vLLM (batch and events as maps, sha256 digests as
//     bytes, the event tag first, defaults such as extra_keys omitted);
//   - sglang: SGLang's radix cache (tagged arrays, one BlockStored or
//     BlockRemoved per page, signed 64-bit hashes, no dp rank, lora_id nil).
//
// libs/worker/engines/rehash re-hashes them and checks the result against
// the chains the router computes from requests.json. Rewrite them with
//
//	go test -run TestRecordings -update
const recordingBlockSize = 16

// recordingRequests are the token ids behind the recordings: A is a 40
// token prompt and 8 generated tokens, B shares A's first block, C's first
// block was cached before the subscriber started, D runs under a LoRA
// adapter, F comes after the cache reset.
func recordingRequests() map[string][]uint32 {
	gen := func(n int, seed uint32) []uint32 {
		out := make([]uint32, n)
		x := seed
		for i := range out {
			x = x*1664525 + 1013904223
			out[i] = 1000 + x%31000
		}
		return out
	}
	a := gen(48, 1)
	b := append(append([]uint32{}, a[:16]...), gen(34, 2)...)
	return map[string][]uint32{"A": a, "B": b, "C": gen(32, 3), "D": gen(16, 4), "F": gen(40, 5)}
}

// recBlock is one block of a recording: its request and index.
type recBlock struct {
	req string
	i   int
}

// recEvent is one event of the recorded history, engine-neutral.
type recEvent struct {
	kind     Kind
	blocks   []recBlock // stored or removed, in order
	parent   *recBlock  // stored: the first block's parent
	orphan   bool       // stored: the parent is a block the subscriber never saw
	loraID   int
	tokens   []uint32 // stored: the blocks' tokens
	loraName string
}

func recordingHistory(reqs map[string][]uint32) [][]recEvent {
	bs := recordingBlockSize
	stored := func(req string, from, to int, parent *recBlock) recEvent {
		e := recEvent{kind: KindStored, parent: parent, tokens: reqs[req][from*bs : to*bs]}
		for i := from; i < to; i++ {
			e.blocks = append(e.blocks, recBlock{req, i})
		}
		return e
	}
	removed := func(req string, i int) recEvent {
		return recEvent{kind: KindRemoved, blocks: []recBlock{{req, i}}}
	}
	orphan := stored("C", 1, 2, &recBlock{"C", 0})
	orphan.orphan = true
	lora := stored("D", 0, 1, nil)
	lora.loraID, lora.loraName = 1, "sql-adapter"
	return [][]recEvent{
		{stored("A", 0, 2, nil)},
		{stored("B", 1, 3, &recBlock{"A", 0})},
		{stored("A", 2, 3, &recBlock{"A", 1})},
		{removed("A", 2), removed("A", 1)},
		{orphan, lora},
		{{kind: KindCleared}, stored("F", 0, 2, nil)},
	}
}

// recDigest is the block's engine hash: sha256 over its request's tokens
// up to the block's end (chained, as vLLM's are, in effect).
func recDigest(reqs map[string][]uint32, b recBlock) []byte {
	h := sha256.New()
	fmt.Fprint(h, reqs[b.req][:(b.i+1)*recordingBlockSize])
	return h.Sum(nil)
}

// recInt is the digest as vLLM's integer hash (its last 8 bytes).
func recInt(d []byte) uint64 { return binary.BigEndian.Uint64(d[len(d)-8:]) }

// recSigned is the digest as SGLang's signed 64-bit hash.
func recSigned(d []byte) int64 { return int64(binary.BigEndian.Uint64(d[:8])) }

func tokenArr(ts []uint32) arr {
	a := make(arr, len(ts))
	for i, t := range ts {
		a[i] = int(t)
	}
	return a
}

// recordingPayloads encodes the history for one engine.
func recordingPayloads(engine string, reqs map[string][]uint32) [][]byte {
	var out [][]byte
	for step, events := range recordingHistory(reqs) {
		ts := 1761300000.0 + float64(step)*0.25
		var evs arr
		for _, e := range events {
			evs = append(evs, recordingEvents(engine, reqs, e)...)
		}
		var batch any
		switch engine {
		case "vllm-array":
			batch = arr{ts, evs, 0}
		case "vllm-map":
			batch = kv{"ts", ts, "events", evs, "data_parallel_rank", 0}
		case "sglang":
			batch = arr{ts, evs}
		}
		out = append(out, newEnc().v(batch).buf.Bytes())
	}
	return out
}

func recordingEvents(engine string, reqs map[string][]uint32, e recEvent) arr {
	hash := func(b recBlock) any {
		d := recDigest(reqs, b)
		if e.orphan && b == *e.parent {
			s := sha256.Sum256([]byte("cached before the subscriber started"))
			d = s[:]
		}
		switch engine {
		case "vllm-array":
			return recInt(d)
		case "sglang":
			return recSigned(d)
		}
		return d
	}
	hashes := func(bs []recBlock) arr {
		a := arr{}
		for _, b := range bs {
			a = append(a, hash(b))
		}
		return a
	}
	var parent any
	if e.parent != nil {
		parent = hash(*e.parent)
	}
	var lora, loraName any
	if e.loraID != 0 {
		lora, loraName = e.loraID, e.loraName
	}
	switch {
	case engine == "sglang" && e.kind == KindStored:
		// One event per page, each the next one's parent; SGLang's
		// events never carry a LoRA (its radix key's extra_key is not
		// published).
		var out arr
		for i, b := range e.blocks {
			page := e.tokens[i*recordingBlockSize : (i+1)*recordingBlockSize]
			out = append(out, arr{"BlockStored", arr{hash(b)}, parent, tokenArr(page), recordingBlockSize, nil, "GPU"})
			parent = hash(b)
		}
		return out
	case engine == "vllm-map" && e.kind == KindStored:
		return arr{kv{"type", "BlockStored", "block_hashes", hashes(e.blocks), "parent_block_hash", parent,
			"token_ids", tokenArr(e.tokens), "block_size", recordingBlockSize, "lora_id", lora, "medium", "GPU", "lora_name", loraName}}
	case engine == "vllm-map" && e.kind == KindRemoved:
		return arr{kv{"type", "BlockRemoved", "block_hashes", hashes(e.blocks), "medium", "GPU"}}
	case engine == "vllm-map":
		return arr{kv{"type", "AllBlocksCleared"}}
	case e.kind == KindStored:
		return arr{arr{"BlockStored", hashes(e.blocks), parent, tokenArr(e.tokens), recordingBlockSize, lora, "GPU", loraName}}
	case e.kind == KindRemoved:
		return arr{arr{"BlockRemoved", hashes(e.blocks), "GPU"}}
	}
	return arr{arr{"AllBlocksCleared"}}
}

var recordingEngines = []string{"vllm-array", "vllm-map", "sglang"}

// TestRecordings keeps the recordings equal to their generator and checks
// that every engine's encoding decodes to the same history: the same
// hashes for vLLM's two encodings, one event per page for SGLang.
func TestRecordings(t *testing.T) {
	t.Parallel()
	reqs := recordingRequests()
	dir := filepath.Join("testdata", "recordings")
	if *update {
		js, err := json.Marshal(map[string]any{"block_size": recordingBlockSize, "requests": reqs})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "requests.json"), append(js, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	decoded := map[string][]Batch{}
	for _, engine := range recordingEngines {
		for seq, built := range recordingPayloads(engine, reqs) {
			path := filepath.Join(dir, engine, fmt.Sprintf("%04d.msgpack", seq))
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, built, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if !bytes.Equal(data, built) {
				t.Fatalf("%s differs from its generator; rerun with -update", path)
			}
			b, err := DecodeBatch(data)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			decoded[engine] = append(decoded[engine], *b)
		}
	}
	a, m := decoded["vllm-array"], decoded["vllm-map"]
	for i := range a {
		a[i].TS, m[i].TS = 0, 0
		if !reflect.DeepEqual(a[i], m[i]) {
			t.Errorf("batch %d: array encoding %+v, map encoding %+v", i, a[i], m[i])
		}
	}
	for i, b := range decoded["sglang"] {
		for _, e := range b.Events {
			if e.Kind == KindStored && (len(e.Stored.Hashes) != 1 || e.Stored.BlockSize != recordingBlockSize || len(e.Stored.TokenIDs) != recordingBlockSize) {
				t.Errorf("sglang batch %d: %+v; want one full page per event", i, e.Stored)
			}
		}
	}
}
