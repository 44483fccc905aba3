package llama

import (
	"strings"
	"sync/atomic"
	"testing"
)

// TestCrew: every phase runs each part exactly once, the caller sees all
// parts' writes when run returns (the race detector checks the ordering),
// and stop ends the helpers.
func TestCrew(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, 2, 4} {
		c := startCrew(size)
		out := make([]int, size)
		var calls atomic.Int64
		for phase := 1; phase <= 200; phase++ {
			c.run(func(part int) {
				calls.Add(1)
				out[part] += phase
			})
			want := phase * (phase + 1) / 2
			for part, v := range out {
				if v != want {
					t.Fatalf("size %d phase %d: part %d saw %d, want %d", size, phase, part, v, want)
				}
			}
		}
		c.stop()
		if got := calls.Load(); got != int64(200*size) {
			t.Fatalf("size %d: %d calls, want %d", size, got, 200*size)
		}
	}
}

// A panic in a helper's part reaches the caller of run (where the engine
// recovers a failed step) instead of ending the process, and the crew
// goes on serving later phases.
func TestCrewHelperPanic(t *testing.T) {
	t.Parallel()
	c := startCrew(3)
	defer c.stop()
	func() {
		defer func() {
			r := recover()
			msg, _ := r.(string)
			if !strings.Contains(msg, "crew part 2 panicked: boom") {
				t.Fatalf("recovered %v, want the helper's panic", r)
			}
		}()
		c.run(func(part int) {
			if part == 2 {
				panic("boom")
			}
		})
		t.Fatal("run returned after a helper panicked")
	}()
	var calls atomic.Int64
	c.run(func(int) { calls.Add(1) })
	if calls.Load() != 3 {
		t.Fatalf("the phase after the panic ran %d parts, want 3", calls.Load())
	}
}
