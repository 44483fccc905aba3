package vllmevents

import "fmt"

// Decoder decodes vLLM KV event batches. It reuses its buffers across
// calls, so steady-state decoding allocates nothing (a LoRA name seen for
// the first time is the exception). A Decoder is not safe for concurrent
// use; a Batch it fills, and every slice in it, is only valid until the
// next Decode on the same Decoder.
//
// Accepted encodings (both as msgspec writes them):
//
//   - batch as an array [ts, events, data_parallel_rank?, ...] or a map
//     with keys "ts", "events", "data_parallel_rank";
//   - each event as a tagged array ["BlockStored", block_hashes,
//     parent_block_hash, token_ids, block_size, lora_id, medium, lora_name,
//     extra_keys, ...] / ["BlockRemoved", block_hashes, medium, ...] /
//     ["AllBlocksCleared", ...] (older vLLM), or as a map with "type" and
//     the same field names (newer vLLM). Missing trailing fields take their
//     zero values (msgspec omits defaults); unknown trailing fields and map
//     keys are skipped, and so are events of unknown type (counted in
//     Batch.Skipped).
//
// Block hashes may be integers, signed or unsigned (a negative one is
// reinterpreted as its 64-bit two's complement, which is what Python's
// hash() based vLLM versions send), or bytes/str digests (newer vLLM with
// VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=0). A digest is reduced to its last
// 8 bytes read big-endian, zero-extended when shorter: exactly the integer
// vLLM itself sends when that variable is 1 (int.from_bytes(digest, "big")
// & (2**64-1)), so both settings index the same blocks.
type Decoder struct {
	r      reader
	hashes []uint64
	tokens []uint32
	events []Event
	loras  map[string]string // interned LoRA names
}

// maxLoraNames bounds the LoRA name intern table.
const maxLoraNames = 256

// Decode decodes payload into b, replacing its contents.
func (d *Decoder) Decode(payload []byte, b *Batch) error {
	d.r = reader{b: payload}
	d.hashes = d.hashes[:0]
	d.tokens = d.tokens[:0]
	d.events = d.events[:0]
	*b = Batch{}
	if err := d.batch(b); err != nil {
		return fmt.Errorf("decode batch: %w", err)
	}
	if !d.r.done() {
		return fmt.Errorf("decode batch: %w", d.r.fail("trailing bytes"))
	}
	b.Events = d.events
	return nil
}

// DecodeBatch decodes one payload with a fresh Decoder. It allocates; use
// a long-lived Decoder on hot paths.
func DecodeBatch(payload []byte) (*Batch, error) {
	var d Decoder
	b := new(Batch)
	return b, d.Decode(payload, b)
}

func (d *Decoder) batch(b *Batch) error {
	n, isMap, err := d.r.container()
	if err != nil {
		return err
	}
	if isMap {
		return d.batchMap(b, n)
	}
	if n < 2 {
		return d.r.fail("batch array needs ts and events")
	}
	if b.TS, err = d.r.float(); err != nil {
		return fmt.Errorf("ts: %w", err)
	}
	if err := d.eventList(b); err != nil {
		return err
	}
	if n >= 3 {
		if err := d.dpRank(b); err != nil {
			return err
		}
	}
	for range n - 3 {
		if err := d.r.skip(0); err != nil {
			return err
		}
	}
	return nil
}

func (d *Decoder) batchMap(b *Batch, n int) error {
	var sawEvents bool
	for range n {
		key, err := d.r.bytes()
		if err != nil {
			return fmt.Errorf("batch key: %w", err)
		}
		switch string(key) {
		case "ts":
			if b.TS, err = d.r.float(); err != nil {
				return fmt.Errorf("ts: %w", err)
			}
		case "events":
			sawEvents = true
			if err := d.eventList(b); err != nil {
				return err
			}
		case "data_parallel_rank":
			if err := d.dpRank(b); err != nil {
				return err
			}
		default:
			if err := d.r.skip(0); err != nil {
				return err
			}
		}
	}
	if !sawEvents {
		return d.r.fail("batch map without events")
	}
	return nil
}

func (d *Decoder) dpRank(b *Batch) error {
	if d.r.nil() {
		return nil
	}
	v, _, err := d.r.int()
	if err != nil {
		return fmt.Errorf("data_parallel_rank: %w", err)
	}
	b.DPRank, b.HasDPRank = int64(v), true
	return nil
}

func (d *Decoder) eventList(b *Batch) error {
	n, err := d.r.array()
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	for i := range n {
		var e Event
		known, err := d.event(&e)
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		if !known {
			b.Skipped++
			continue
		}
		d.events = append(d.events, e)
	}
	return nil
}

// event decodes one event, reporting false for an unknown (skipped) type.
func (d *Decoder) event(e *Event) (bool, error) {
	n, isMap, err := d.r.container()
	if err != nil {
		return false, err
	}
	if isMap {
		return d.eventMap(e, n)
	}
	if n == 0 {
		return false, d.r.fail("empty event array")
	}
	tag, err := d.r.bytes()
	if err != nil {
		return false, fmt.Errorf("tag: %w", err)
	}
	e.Kind = kindOf(tag)
	for i := 1; i < n; i++ {
		if err := d.field(e, arrayField(e.Kind, i)); err != nil {
			return false, err
		}
	}
	if e.Kind == 0 {
		*e = Event{}
		return false, nil
	}
	d.finish(e)
	return true, nil
}

// arrayField names field i (the tag is field 0) of the tagged-array
// encoding of kind; "" for fields this package skips.
func arrayField(k Kind, i int) string {
	switch k {
	case KindStored:
		switch i {
		case 1:
			return "block_hashes"
		case 2:
			return "parent_block_hash"
		case 3:
			return "token_ids"
		case 4:
			return "block_size"
		case 5:
			return "lora_id"
		case 6:
			return "medium"
		case 7:
			return "lora_name"
		case 8:
			return "extra_keys"
		}
	case KindRemoved:
		switch i {
		case 1:
			return "block_hashes"
		case 2:
			return "medium"
		}
	}
	return ""
}

func (d *Decoder) eventMap(e *Event, n int) (bool, error) {
	for range n {
		key, err := d.r.bytes()
		if err != nil {
			return false, fmt.Errorf("event key: %w", err)
		}
		if string(key) == "type" {
			tag, err := d.r.bytes()
			if err != nil {
				return false, fmt.Errorf("type: %w", err)
			}
			if e.Kind = kindOf(tag); e.Kind == 0 {
				e.Kind = 255 // unknown type: remember to skip the event
			}
			continue
		}
		if err := d.field(e, fieldName(key)); err != nil {
			return false, err
		}
	}
	switch e.Kind {
	case 0:
		return false, d.r.fail(`event map without "type"`)
	case 255:
		*e = Event{}
		return false, nil
	}
	d.finish(e)
	return true, nil
}

// fieldName returns the known event field name equal to key, or "" (a
// constant either way, so nothing is allocated per key).
func fieldName(key []byte) string {
	switch string(key) {
	case "block_hashes":
		return "block_hashes"
	case "parent_block_hash":
		return "parent_block_hash"
	case "token_ids":
		return "token_ids"
	case "block_size":
		return "block_size"
	case "lora_id":
		return "lora_id"
	case "medium":
		return "medium"
	case "lora_name":
		return "lora_name"
	case "extra_keys":
		return "extra_keys"
	}
	return ""
}

func kindOf(tag []byte) Kind {
	switch string(tag) {
	case "BlockStored":
		return KindStored
	case "BlockRemoved":
		return KindRemoved
	case "AllBlocksCleared":
		return KindCleared
	}
	return 0
}
