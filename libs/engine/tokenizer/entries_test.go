package tokenizer

import (
	"encoding/binary"
	"errors"
	"testing"
)

// BPEEntries counts what ParseBPE reads and refuses what it refuses.
func TestBPEEntries(t *testing.T) {
	t.Parallel()
	entry := func(piece string) []byte {
		b := binary.LittleEndian.AppendUint32(nil, 0) // score
		b = binary.LittleEndian.AppendUint32(b, uint32(len(piece)))
		return append(b, piece...)
	}
	file := binary.LittleEndian.AppendUint32(nil, 3)
	for _, p := range []string{"a", "bc", "def"} {
		file = append(file, entry(p)...)
	}
	n, err := BPEEntries(file)
	if err != nil || n != 3 {
		t.Fatalf("BPEEntries = %d, %v; want 3", n, err)
	}
	if _, err := ParseBPE(file, n); err != nil {
		t.Fatalf("ParseBPE with the count: %v", err)
	}
	for name, b := range map[string][]byte{
		"short header":    {1, 2},
		"truncated entry": file[:len(file)-5],
		"negative length": append(binary.LittleEndian.AppendUint32(nil, 1), 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff),
	} {
		if _, err := BPEEntries(b); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: err = %v; want ErrFormat", name, err)
		}
	}
}
