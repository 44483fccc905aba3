package approx

import (
	"slices"
	"testing"
	"time"
)

func TestTracker(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(0, 0)
	tr := New(time.Minute, 4)
	if s, e := tr.Insert("w", []uint64{1, 2, 3}, t0); !slices.Equal(s, []uint64{1, 2, 3}) || e != nil {
		t.Fatalf("insert: %v %v", s, e)
	}
	// Refreshing 1 makes 2 the oldest.
	if s, e := tr.Insert("w", []uint64{1, 4, 5}, t0.Add(30*time.Second)); !slices.Equal(s, []uint64{1, 4, 5}) || !slices.Equal(e, []uint64{2}) {
		t.Fatalf("insert over cap: %v %v", s, e)
	}
	if s, _ := tr.Insert("x", []uint64{1, 2, 3, 4, 5, 6}, t0); !slices.Equal(s, []uint64{1, 2, 3, 4}) {
		t.Fatalf("long prompt stored %v, want its first 4 blocks", s)
	}
	got := tr.Expire(t0.Add(time.Minute))
	if !slices.Equal(got["w"], []uint64{3}) || len(got["x"]) != 4 {
		t.Fatalf("expire: %v", got)
	}
	if tr.Len("w") != 3 || tr.Len("x") != 0 {
		t.Fatalf("len w=%d x=%d", tr.Len("w"), tr.Len("x"))
	}
	tr.Forget("w")
	if tr.Len("w") != 0 {
		t.Fatal("forget")
	}
}
