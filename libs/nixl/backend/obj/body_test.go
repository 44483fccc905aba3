package obj

import (
	"errors"
	"io"
	"testing"
)

// TestBodySeal: a sealed body reads and seeks no more; before, it reads,
// rewinds and reads the same bytes again, as the SDK's signing does.
func TestBodySeal(t *testing.T) {
	t.Parallel()
	b := newBody([]byte("kv block"))
	got, err := io.ReadAll(b)
	if err != nil || string(got) != "kv block" {
		t.Fatalf("read %q, %v", got, err)
	}
	if _, err := b.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(b); string(got) != "kv block" {
		t.Fatalf("after a rewind: %q", got)
	}
	b.seal()
	if _, err := b.Read(make([]byte, 1)); !errors.Is(err, errSealed) {
		t.Fatalf("read after seal: %v", err)
	}
	if _, err := b.Seek(0, io.SeekStart); !errors.Is(err, errSealed) {
		t.Fatalf("seek after seal: %v", err)
	}
}
