package routesim

import "time"

// event is the next arrival (worker -1), the end of a worker's step, or
// a prefix pull landing on a worker (land set). The queue holds at most
// one arrival (the next request is read only when the previous one has
// arrived), one step per worker, and the pulls in flight.
type event struct {
	at     time.Duration
	worker int
	land   *pull
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }

// Less orders by time; at equal times steps end before the arrival (a
// worker that finishes a step at that instant has already reported it),
// and workers end in index order, so a replay is deterministic.
func (q eventQueue) Less(a, b int) bool {
	x, y := q[a], q[b]
	if x.at != y.at {
		return x.at < y.at
	}
	if (x.worker < 0) != (y.worker < 0) {
		return x.worker >= 0
	}
	if (x.land == nil) != (y.land == nil) { // a landing before a step's end
		return x.land != nil
	}
	if x.land != nil {
		return x.land.id < y.land.id
	}
	return x.worker < y.worker
}
func (q eventQueue) Swap(a, b int) { q[a], q[b] = q[b], q[a] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
