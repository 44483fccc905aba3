package load

import (
	"testing"
	"time"
)

func TestTracker(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	type step struct {
		do   func(tr *Tracker)
		want map[string]Load
	}
	add := func(origin, id, dec, pre string, pb, db uint32) func(*Tracker) {
		return func(tr *Tracker) {
			tr.Add(t0, Add{Origin: origin, RequestID: id, Decode: dec, Prefill: pre, PrefillBlocks: pb, DecodeBlocks: db, PrefillFor: time.Second})
		}
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"aggregated lifecycle", []step{
			{add("r1", "a", "w1", "", 4, 10), map[string]Load{"w1": {4, 10}}},
			{func(tr *Tracker) { tr.PrefillDone("r1", "a") }, map[string]Load{"w1": {0, 10}}},
			{func(tr *Tracker) { tr.PrefillDone("r1", "a") }, map[string]Load{"w1": {0, 10}}},
			{func(tr *Tracker) { tr.Free("r1", "a") }, map[string]Load{}},
		}},
		{"disaggregated", []step{
			{add("r1", "a", "d1", "p1", 4, 10), map[string]Load{"d1": {0, 10}, "p1": {4, 0}}},
			{func(tr *Tracker) { tr.Free("r1", "a") }, map[string]Load{}},
		}},
		{"same id, other origin", []step{
			{add("r1", "a", "w1", "", 1, 1), map[string]Load{"w1": {1, 1}}},
			{add("r2", "a", "w1", "", 1, 1), map[string]Load{"w1": {2, 2}}},
			{func(tr *Tracker) { tr.Free("r2", "a") }, map[string]Load{"w1": {1, 1}}},
		}},
		{"re-add replaces", []step{
			{add("r1", "a", "w1", "", 1, 1), map[string]Load{"w1": {1, 1}}},
			{add("r1", "a", "w2", "", 1, 1), map[string]Load{"w2": {1, 1}}},
		}},
		{"estimates and ttl", []step{
			{add("r1", "a", "w1", "", 4, 10), map[string]Load{"w1": {4, 10}}},
			{func(tr *Tracker) { tr.Expire(t0.Add(999 * time.Millisecond)) }, map[string]Load{"w1": {4, 10}}},
			{func(tr *Tracker) { tr.Expire(t0.Add(time.Second)) }, map[string]Load{"w1": {0, 10}}},
			{func(tr *Tracker) { tr.Expire(t0.Add(time.Minute)) }, map[string]Load{}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := New(time.Minute)
			for i, s := range tt.steps {
				s.do(tr)
				got := tr.All()
				if len(got) != len(s.want) {
					t.Fatalf("step %d: loads %v, want %v", i, got, s.want)
				}
				for id, l := range s.want {
					if got[id] != l {
						t.Fatalf("step %d: loads %v, want %v", i, got, s.want)
					}
				}
			}
		})
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	tr := New(time.Minute)
	tr.Add(time.Now(), Add{Origin: "r", RequestID: "x", Decode: "b", PrefillBlocks: 2, DecodeBlocks: 3})
	got := tr.Get([]string{"a", "b"}, nil)
	if len(got) != 2 || got[0] != (Load{}) || got[1] != (Load{2, 3}) {
		t.Fatalf("Get = %v", got)
	}
	if tr.Len() != 1 {
		t.Fatalf("Len = %d", tr.Len())
	}
}
