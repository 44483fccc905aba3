package upstream

import (
	"fmt"
	"log/slog"
	"math"
	"slices"
	"testing"

	"switchyard.dev/libs/mesh/canary"
	"switchyard.dev/libs/mesh/discovery"
)

// TestRouterCanaryShare: the routers' canary is asked first for its
// weight of requests within 2 points over 1,000 conversations, whatever
// the replica counts; every replica stays in the failover order; a
// conversation keeps its group.
func TestRouterCanaryShare(t *testing.T) {
	t.Parallel()
	for _, counts := range [][2]int{{1, 1}, {1, 6}, {5, 2}} {
		split, err := canary.NewSplit(0)
		if err != nil {
			t.Fatal(err)
		}
		split.Set(canary.Rollouts{discovery.RoleRouter: {Version: "2", Weight: 0.25}})
		r := NewRouters(NewHTTPClient(), slog.New(slog.DiscardHandler), nil)
		r.SetSplit(split)
		var urls []string
		var ins []discovery.Instance
		for i := range counts[0] + counts[1] {
			v := "1"
			if i < counts[0] {
				v = "2"
			}
			urls = append(urls, fmt.Sprintf("http://127.0.0.1:%d", 9000+i))
			ins = append(ins, discovery.Instance{ID: fmt.Sprint("r", i), Role: discovery.RoleRouter, Version: v})
		}
		r.set(urls, ins)
		v := r.view.Load()
		first := 0
		for i := range 1000 {
			key := canary.SessionKey(fmt.Sprint("conversation-", i))
			order := r.order(v, key)
			if got := slices.Sorted(slices.Values(order)); !slices.Equal(got, seq(len(urls))) {
				t.Fatalf("order %v does not try every replica once", order)
			}
			isCanary := ins[order[0]].Version == "2"
			if isCanary {
				first++
			}
			if again := r.order(v, key); (ins[again[0]].Version == "2") != isCanary {
				t.Fatalf("conversation %d changed group", i)
			}
		}
		if got := float64(first) / 1000; math.Abs(got-0.25) > 0.02 {
			t.Errorf("%d canary and %d baseline routers: canary share %.3f, want 0.25±0.02", counts[0], counts[1], got)
		}
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
