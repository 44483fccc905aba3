package radix

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"testing"

	"switchyard.dev/libs/kvtier"
)

// sampleIndex builds a small index exercising every snapshot feature.
func sampleIndex(t testing.TB) *Index {
	t.Helper()
	ix := New()
	for _, name := range []string{"a", "b", "worker-ü"} {
		if err := ix.AddWorker(name); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ix.ApplyBatch("a", 0, []Event{StoredEvent(kvtier.Device, 0, 1, 2, 1<<63), StoredEvent(kvtier.Host, 2, 3)}))
	must(ix.ApplyBatch("a", 1, []Event{RemovedEvent(kvtier.Device, 1)}))
	must(ix.Resync("b", 41, []Block{{5, 0b1010}, {1, 0b0001}}))
	return ix
}

// encodeBody appends the CRC a valid snapshot would carry to body.
func encodeBody(body []byte) []byte {
	return binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
}

func TestSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	ix := sampleIndex(t)
	snap := ix.Snapshot()
	back, err := Restore(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(ix) {
		t.Fatalf("restored %v, want %v", back.Dump(), ix.Dump())
	}
	if again := back.Snapshot(); !bytes.Equal(again, snap) {
		t.Fatalf("snapshot is not canonical:\n%x\n%x", again, snap)
	}
	// The restored index keeps working, sequence numbers included.
	if err := back.ApplyBatch("b", 42, []Event{StoredEvent(kvtier.Device, 9)}); err != nil {
		t.Fatal(err)
	}
	if err := back.ApplyBatch("a", 2, nil); err != nil {
		t.Fatal(err)
	}
	if prefix := []byte("xyz"); !bytes.Equal(ix.AppendSnapshot(prefix)[3:], snap) {
		t.Fatal("AppendSnapshot differs from Snapshot")
	}
}

func TestRestoreRejects(t *testing.T) {
	t.Parallel()
	valid := sampleIndex(t).Snapshot()
	body := valid[:len(valid)-4]
	header := []byte("SYRX\x01\x00\x00\x00")
	worker := func(name string, next uint64, blocks ...Block) []byte {
		b := binary.AppendUvarint(nil, uint64(len(name)))
		b = append(b, name...)
		b = binary.AppendUvarint(b, next)
		b = binary.AppendUvarint(b, uint64(len(blocks)))
		for _, bl := range blocks {
			b = binary.LittleEndian.AppendUint64(b, bl.Hash)
			b = append(b, byte(bl.Tiers))
		}
		return b
	}
	cat := func(parts ...[]byte) []byte { return encodeBody(bytes.Join(parts, nil)) }
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"short", []byte("SYRX")},
		{"bad checksum", append(bytes.Clone(body), 0, 0, 0, 0)},
		{"flipped bit", func() []byte { b := bytes.Clone(valid); b[10] ^= 1; return b }()},
		{"bad magic", cat([]byte("XXXX\x01\x00\x00\x00"), []byte{0})},
		{"bad version", cat([]byte("SYRX\x02\x00\x00\x00"), []byte{0})},
		{"bad flags", cat([]byte("SYRX\x01\x00\x01\x00"), []byte{0})},
		{"trailing bytes", cat(body, []byte{0})},
		{"truncated worker", cat(header, []byte{1}, worker("a", 0, Block{1, 1})[:5])},
		{"worker count too big", cat(header, []byte{0xff, 0xff, 0x03})},
		{"bad varint", cat(header, bytes.Repeat([]byte{0xff}, 11))},
		{"empty id", cat(header, []byte{1}, worker("", 0))},
		{"id too long", cat(header, []byte{1}, worker(string(make([]byte, 2000)), 0))},
		{"block count too big", cat(header, []byte{1}, worker("a", 0)[:3], []byte{0x7f})},
		{"empty tier mask", cat(header, []byte{1}, worker("a", 0, Block{1, 0}))},
		{"unknown tier", cat(header, []byte{1}, worker("a", 0, Block{1, 0x10}))},
		{"blocks out of order", cat(header, []byte{1}, worker("a", 0, Block{2, 1}, Block{1, 1}))},
		{"duplicate block", cat(header, []byte{1}, worker("a", 0, Block{2, 1}, Block{2, 1}))},
		{"workers out of order", cat(header, []byte{2}, worker("b", 0), worker("a", 0))},
		{"duplicate worker", cat(header, []byte{2}, worker("a", 0), worker("a", 0))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ix, err := Restore(tc.data)
			if !errors.Is(err, ErrBadSnapshot) || ix != nil {
				t.Fatalf("Restore = %v, %v; want ErrBadSnapshot", ix, err)
			}
		})
	}
}

// FuzzRestore feeds arbitrary bytes to Restore: it must never panic, and
// whatever it accepts must re-encode to the same bytes (the format is
// canonical). Each input is also tried with a valid checksum appended, so
// the fuzzer reaches the parser behind the CRC.
func FuzzRestore(f *testing.F) {
	f.Add(sampleIndex(f).Snapshot())
	f.Add(New().Snapshot())
	f.Add([]byte("SYRX\x01\x00\x00\x00"))
	f.Add(encodeBody([]byte("SYRX\x01\x00\x00\x00\x01\x01a\x00\x01\x01\x00\x00\x00\x00\x00\x00\x00\x03")))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, encodeBody(bytes.Clone(data))} {
			ix, err := Restore(in)
			if err != nil {
				continue
			}
			if got := ix.Snapshot(); !bytes.Equal(got, in) {
				t.Fatalf("accepted %x but re-encodes to %x", in, got)
			}
		}
	})
}

// DumpWorker is one worker's part of Dump.
func TestDumpWorker(t *testing.T) {
	t.Parallel()
	ix := sampleIndex(t)
	all := ix.Dump()
	for name, want := range all {
		got, ok := ix.DumpWorker(name)
		if !ok || got.Next != want.Next || !slices.Equal(got.Blocks, want.Blocks) {
			t.Errorf("%s: %+v, %v; want %+v", name, got, ok, want)
		}
	}
	if _, ok := ix.DumpWorker("nobody"); ok {
		t.Error("an unknown worker found")
	}
}
