package s3tier

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// The body reads, and seeks, as the header and data laid end to end.
func TestBlockBody(t *testing.T) {
	t.Parallel()
	hdr, data := []byte("header:"), []byte("the block's data")
	want := append(bytes.Clone(hdr), data...)
	b := newPutBody(hdr, data)
	for _, chunk := range []int{1, 3, 7, 64} {
		if _, err := b.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		var got []byte
		buf := make([]byte, chunk)
		for {
			n, err := b.Read(buf)
			got = append(got, buf[:n]...)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Errorf("read in chunks of %d: %q, want %q", chunk, got, want)
		}
	}
	for off := range len(want) + 1 {
		got := make([]byte, len(want)-off)
		if n, err := (blockBody{hdr, data}).ReadAt(got, int64(off)); n != len(got) || (err != nil && !errors.Is(err, io.EOF)) || !bytes.Equal(got, want[off:]) {
			t.Errorf("ReadAt %d: %d %v %q, want %q", off, n, err, got, want[off:])
		}
	}
}

// Once sealed (Put returned), the body reads nothing of the block.
func TestPutBodySealed(t *testing.T) {
	t.Parallel()
	b := newPutBody([]byte("h"), []byte("data"))
	b.seal()
	if n, err := b.Read(make([]byte, 8)); n != 0 || err == nil {
		t.Fatalf("Read after seal: %d, %v", n, err)
	}
	if _, err := b.Seek(0, io.SeekStart); err == nil {
		t.Fatal("Seek after seal passed")
	}
}
