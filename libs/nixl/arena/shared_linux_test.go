package arena_test

import (
	"testing"

	"switchyard.dev/libs/nixl/arena"
)

// A shared arena's slices lead to its memory file, and a second mapping
// of that file (as another process makes) sees the same bytes both ways.
func TestSharedArenaMapsTheSamePages(t *testing.T) {
	const size = 3 << 20
	a, err := arena.MapShared(size)
	if err != nil {
		t.Fatal(err)
	}
	mem := a.Bytes()
	win := mem[1<<20+100 : 2<<20]
	f, off, ok := arena.SharedFile(win)
	if !ok || off != 1<<20+100 {
		t.Fatalf("SharedFile(window) = %v, %d, %v; want the arena's file at %d", f, off, ok, 1<<20+100)
	}
	if _, _, ok := arena.SharedFile(mem[size-10 : size]); !ok {
		t.Fatal("the arena's last bytes are not found")
	}
	other, err := arena.MapFile(f, size)
	if err != nil {
		t.Fatal(err)
	}
	mem[off] = 7
	other.Bytes()[size-1] = 9
	if other.Bytes()[off] != 7 || mem[size-1] != 9 {
		t.Fatal("the two mappings do not share pages")
	}
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	plain, err := arena.Map(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, _, ok := arena.SharedFile(plain.Bytes()); ok {
		t.Fatal("an anonymous arena has a file")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := arena.SharedFile(win); ok {
		t.Fatal("a closed arena is still found")
	}
}
