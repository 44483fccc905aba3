package radix

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"

	"switchyard.dev/libs/kvtier"
)

// Snapshot format, version 1. All fixed-width integers are little-endian;
// counts and sequence numbers are unsigned varints (encoding/binary).
//
//	magic    "SYRX"
//	version  uint16 = 1
//	flags    uint16 = 0
//	workers  uvarint
//	  per worker, sorted by id, ids unique and non-empty:
//	  idLen   uvarint (1..maxNameLen), id bytes
//	  next    uvarint   next expected sequence number
//	  blocks  uvarint
//	    per block, hashes strictly increasing:
//	    hash  uint64
//	    tiers uint8 (a valid, non-empty kvtier.Mask)
//	crc      uint32    CRC-32C (Castagnoli) of every byte before it
//
// The encoding is canonical: one index state has exactly one snapshot.
const (
	snapMagic   = "SYRX"
	snapVersion = 1
	snapHeader  = 8
	snapCRC     = 4
	blockBytes  = 9
	maxNameLen  = 1024
)

// ErrBadSnapshot is wrapped by every Restore error about the input.
var ErrBadSnapshot = errors.New("radix: bad snapshot")

// Snapshot encodes the index (see Dump for consistency).
func (ix *Index) Snapshot() []byte { return ix.AppendSnapshot(nil) }

// AppendSnapshot appends the encoded index to dst.
func (ix *Index) AppendSnapshot(dst []byte) []byte {
	return appendSnapshot(dst, ix.Dump())
}

func appendSnapshot(dst []byte, state map[string]WorkerState) []byte {
	start := len(dst)
	dst = append(dst, snapMagic...)
	dst = binary.LittleEndian.AppendUint16(dst, snapVersion)
	dst = binary.LittleEndian.AppendUint16(dst, 0)
	dst = binary.AppendUvarint(dst, uint64(len(state)))
	for _, name := range slices.Sorted(maps.Keys(state)) {
		ws := state[name]
		dst = binary.AppendUvarint(dst, uint64(len(name)))
		dst = append(dst, name...)
		dst = binary.AppendUvarint(dst, ws.Next)
		dst = binary.AppendUvarint(dst, uint64(len(ws.Blocks)))
		for _, b := range ws.Blocks {
			dst = binary.LittleEndian.AppendUint64(dst, b.Hash)
			dst = append(dst, byte(b.Tiers))
		}
	}
	crc := crc32.Checksum(dst[start:], crc32.MakeTable(crc32.Castagnoli))
	return binary.LittleEndian.AppendUint32(dst, crc)
}

// Restore decodes a snapshot into a new index. It checks everything (size,
// checksum, magic, version, bounds, ordering, tiers) before building
// anything, never panics, and allocates at most in proportion to len(data).
func Restore(data []byte) (*Index, error) {
	state, err := decodeSnapshot(data)
	if err != nil {
		return nil, err
	}
	ix := New()
	for _, name := range slices.Sorted(maps.Keys(state)) {
		ws := state[name]
		if err := ix.AddWorker(name); err != nil {
			return nil, fmt.Errorf("restore: %w", err)
		}
		// The index is not shared yet, so the worker's fresh id can be
		// filled directly, without Resync's swap and sweep.
		w := ix.view.Load().byName[name]
		ix.fill(w.id, ws.Blocks)
		w.next = ws.Next
	}
	return ix, nil
}

func badSnapshot(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadSnapshot, fmt.Sprintf(format, args...))
}

// snapReader walks the snapshot body.
type snapReader struct {
	b   []byte
	off int
}

func (r *snapReader) uvarint(what string) (uint64, error) {
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		return 0, badSnapshot("%s at offset %d: bad varint", what, r.off)
	}
	r.off += n
	return v, nil
}

func (r *snapReader) rest() int { return len(r.b) - r.off }

func decodeSnapshot(data []byte) (map[string]WorkerState, error) {
	if len(data) < snapHeader+1+snapCRC {
		return nil, badSnapshot("%d bytes is too short", len(data))
	}
	body := data[:len(data)-snapCRC]
	want := binary.LittleEndian.Uint32(data[len(body):])
	if got := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)); got != want {
		return nil, badSnapshot("checksum %#08x, want %#08x", got, want)
	}
	if string(body[:4]) != snapMagic {
		return nil, badSnapshot("magic %q", body[:4])
	}
	if v := binary.LittleEndian.Uint16(body[4:]); v != snapVersion {
		return nil, badSnapshot("unsupported version %d", v)
	}
	if f := binary.LittleEndian.Uint16(body[6:]); f != 0 {
		return nil, badSnapshot("unknown flags %#x", f)
	}
	r := &snapReader{b: body, off: snapHeader}
	n, err := r.uvarint("worker count")
	if err != nil {
		return nil, err
	}
	// Every worker takes at least 4 bytes, which bounds the map size.
	if n > maxIDs || n > uint64(r.rest()/4) {
		return nil, badSnapshot("%d workers in %d bytes", n, r.rest())
	}
	state := make(map[string]WorkerState, n)
	prev := ""
	for i := range n {
		name, ws, err := r.worker()
		if err != nil {
			return nil, fmt.Errorf("worker %d: %w", i, err)
		}
		if i > 0 && name <= prev {
			return nil, badSnapshot("worker %q out of order after %q", name, prev)
		}
		prev = name
		state[name] = ws
	}
	if r.rest() != 0 {
		return nil, badSnapshot("%d trailing bytes", r.rest())
	}
	return state, nil
}

func (r *snapReader) worker() (string, WorkerState, error) {
	l, err := r.uvarint("id length")
	if err != nil {
		return "", WorkerState{}, err
	}
	if l == 0 || l > maxNameLen || l > uint64(r.rest()) {
		return "", WorkerState{}, badSnapshot("id length %d", l)
	}
	name := string(r.b[r.off : r.off+int(l)])
	r.off += int(l)
	var ws WorkerState
	if ws.Next, err = r.uvarint("next seq"); err != nil {
		return "", WorkerState{}, err
	}
	nb, err := r.uvarint("block count")
	if err != nil {
		return "", WorkerState{}, err
	}
	if nb > uint64(r.rest()/blockBytes) {
		return "", WorkerState{}, badSnapshot("%d blocks in %d bytes", nb, r.rest())
	}
	ws.Blocks = make([]Block, nb)
	for j := range ws.Blocks {
		b := Block{
			Hash:  binary.LittleEndian.Uint64(r.b[r.off:]),
			Tiers: kvtier.Mask(r.b[r.off+8]),
		}
		r.off += blockBytes
		if !b.Tiers.Valid() {
			return "", WorkerState{}, badSnapshot("block %#x: tiers %#x", b.Hash, b.Tiers)
		}
		if j > 0 && b.Hash <= ws.Blocks[j-1].Hash {
			return "", WorkerState{}, badSnapshot("block %#x out of order", b.Hash)
		}
		ws.Blocks[j] = b
	}
	return name, ws, nil
}
