package llama

import (
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
