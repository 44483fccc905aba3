//go:build unix

package file

import (
	"errors"
	"slices"
	"testing"

	"switchyard.dev/libs/nixl"
)

// TestPlan: pieces that follow each other in a file become one vectored
// I/O, up to MaxIO bytes and maxIOV buffers; a gap, another file or a
// large descriptor starts a new one.
func TestPlan(t *testing.T) {
	t.Parallel()
	mem := make([]byte, 1<<20)
	pair := func(region nixl.RegionID, memOff, fileOff, n int) nixl.Pair {
		return nixl.Pair{Local: mem[memOff : memOff+n], Remote: nixl.RemoteDesc{Region: region, Offset: uint64(fileOff)}}
	}
	for _, tc := range []struct {
		name  string
		maxIO int
		pairs []nixl.Pair
		want  [][2]int // per op: file offset, buffers
	}{
		{"adjacent in the file, scattered in memory", 1 << 20,
			[]nixl.Pair{pair(1, 8192, 0, 4096), pair(1, 0, 4096, 4096), pair(1, 65536, 8192, 100)},
			[][2]int{{0, 3}}},
		{"a gap", 1 << 20, []nixl.Pair{pair(1, 0, 0, 4096), pair(1, 4096, 8192, 4096)}, [][2]int{{0, 1}, {8192, 1}}},
		{"another file", 1 << 20, []nixl.Pair{pair(1, 0, 0, 4096), pair(2, 4096, 4096, 4096)}, [][2]int{{0, 1}, {4096, 1}}},
		{"split at MaxIO", 8192, []nixl.Pair{pair(1, 0, 0, 20000)}, [][2]int{{0, 1}, {8192, 1}, {16384, 1}}},
		{"merged up to MaxIO", 8192, []nixl.Pair{pair(1, 0, 0, 4096), pair(1, 8192, 4096, 4096), pair(1, 4096, 8192, 4096)},
			[][2]int{{0, 2}, {8192, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := &Backend{cfg: Config{MaxIO: tc.maxIO}.withDefaults(), files: map[nixl.RegionID]*file{1: {}, 2: {}}}
			ops, err := b.plan(tc.pairs)
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) != len(tc.want) {
				t.Fatalf("%d ops, want %d", len(ops), len(tc.want))
			}
			for i, o := range ops {
				if int(o.off) != tc.want[i][0] || len(o.bufs) != tc.want[i][1] {
					t.Fatalf("op %d at %d with %d buffers, want %v", i, o.off, len(o.bufs), tc.want[i])
				}
				total := 0
				for _, buf := range o.bufs {
					total += len(buf)
				}
				if total != o.n || o.n > b.cfg.MaxIO {
					t.Fatalf("op %d: %d bytes in buffers, n %d, MaxIO %d", i, total, o.n, b.cfg.MaxIO)
				}
			}
		})
	}
	many := make([]nixl.Pair, maxIOV+1)
	for i := range many {
		many[i] = pair(1, 0, i, 1)
	}
	b := &Backend{cfg: Config{}.withDefaults(), files: map[nixl.RegionID]*file{1: {}}}
	if ops, _ := b.plan(many); len(ops) != 2 || len(ops[0].bufs) != maxIOV {
		t.Fatalf("%d pairs of one byte: %d ops, want 2 (%d buffers at most each)", len(many), len(ops), maxIOV)
	}
	if _, err := b.plan([]nixl.Pair{pair(3, 0, 0, 1)}); !errors.Is(err, nixl.ErrUnknownRegion) {
		t.Fatalf("plan on an unregistered region: %v", err)
	}
}

func TestAdvance(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		want []int // lengths left
	}{
		{0, []int{3, 4}}, {2, []int{1, 4}}, {3, []int{4}}, {5, []int{2}}, {7, nil},
	} {
		bufs := advance([][]byte{make([]byte, 3), make([]byte, 4)}, tc.n)
		var got []int
		for _, b := range bufs {
			got = append(got, len(b))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("advance %d: %v, want %v", tc.n, got, tc.want)
		}
	}
}
