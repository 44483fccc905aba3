package arena

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

func TestMap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		size int
		ok   bool
	}{
		{"page", 4096, true},
		{"odd", 12345, true},
		{"huge", HugePage, true},
		{"huge and odd", 3*HugePage + 12345, true},
		{"zero", 0, false},
		{"negative", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := Map(tc.size)
			if (err == nil) != tc.ok {
				t.Fatalf("Map(%d) err = %v, want ok=%v", tc.size, err, tc.ok)
			}
			if err != nil {
				return
			}
			b := a.Bytes()
			if len(b) != tc.size || b[0] != 0 || b[len(b)-1] != 0 {
				t.Fatalf("mapping len %d, want %d zeroed", len(b), tc.size)
			}
			b[len(b)-1] = 7
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if err := a.Close(); err != nil {
				t.Fatalf("second Close: %v", err)
			}
		})
	}
}

// TestHugeAligned: on Linux an arena of a huge page or more starts on a
// huge page boundary and carries the huge page advice (when the kernel
// has transparent huge pages at all), and every byte of it is usable.
func TestHugeAligned(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("huge page alignment is Linux only")
	}
	a, err := Map(4*HugePage + 100)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := a.Bytes()
	if p := uintptr(unsafe.Pointer(unsafe.SliceData(b))); p%HugePage != 0 {
		t.Fatalf("arena at %#x, not aligned to %d", p, HugePage)
	}
	for i := 0; i < len(b); i += 4096 {
		b[i] = byte(i)
	}
	b[len(b)-1] = 1
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err == nil && !strings.Contains(string(mode), "[never]") && !a.Huge() {
		t.Fatalf("THP is %q but the arena was not advised", strings.TrimSpace(string(mode)))
	}
	if a.Close() != nil {
		t.Fatal("close")
	}
}

func TestPrefault(t *testing.T) {
	t.Parallel()
	for _, size := range []int{4096, 3 << 20} {
		a, err := Map(size)
		if err != nil {
			t.Fatal(err)
		}
		a.Prefault()
		for i, b := range a.Bytes() {
			if b != 0 {
				t.Fatalf("byte %d of a prefaulted arena is %d; want the zeroed mapping", i, b)
			}
		}
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
