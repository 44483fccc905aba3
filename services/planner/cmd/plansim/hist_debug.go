package main

import (
	"fmt"
	"io"
	"time"

	"switchyard.dev/services/planner/internal/plansim"
)

func violationHistogram(w io.Writer, name string, res *plansim.Result, bucket time.Duration) {
	n := int(res.End/bucket) + 1
	counts := make([]int, n)
	for _, at := range res.Violated {
		counts[int(at/bucket)]++
	}
	fmt.Fprintf(w, "%-10s", name)
	for _, c := range counts {
		fmt.Fprintf(w, " %4d", c)
	}
	fmt.Fprintln(w)
}
