package main

import (
	"fmt"
	"io"
	"time"

	"switchyard.dev/services/planner/internal/plansim"
)

// violationHistogram prints how many violating requests arrived in each
// bucket of replay time: where in the load's shape an arm misses.
func violationHistogram(w io.Writer, name string, res *plansim.Result, bucket time.Duration) {
	if bucket <= 0 {
		return
	}
	counts := make([]int, int(res.End/bucket)+1)
	for _, at := range res.Violated {
		counts[min(int(at/bucket), len(counts)-1)]++
	}
	fmt.Fprintf(w, "  %s: violating requests per %v:", name, bucket)
	for _, c := range counts {
		fmt.Fprintf(w, " %d", c)
	}
	fmt.Fprintln(w)
}
