package nixl

import (
	"log/slog"
	"sync"
)

// Bounds of the notifications waiting for GetNotifs. A consumer that
// drains them never comes near; without a bound, a peer (buggy, or anyone
// who can reach the transfer port) sending notifications nobody reads
// would grow the queue until the process runs out of memory.
const (
	MaxQueuedNotifs     = 1 << 16
	MaxQueuedNotifBytes = 64 << 20
)

// notifQueue never stalls a backend's receive path: beyond its bounds it
// drops new notifications, counts them and logs.
type notifQueue struct {
	log     *slog.Logger
	mu      sync.Mutex
	q       []Notif
	bytes   int
	dropped uint64
	signal  chan struct{}
}

func (n *notifQueue) init(log *slog.Logger) {
	n.log = log
	n.signal = make(chan struct{}, 1)
}

func (n *notifQueue) push(from string, msg []byte) {
	n.mu.Lock()
	if len(n.q) >= MaxQueuedNotifs || n.bytes+len(msg) > MaxQueuedNotifBytes {
		n.dropped++
		dropped := n.dropped
		n.mu.Unlock()
		if dropped&(dropped-1) == 0 { // the 1st, 2nd, 4th, 8th, ...
			n.log.Warn("nixl: notification queue full (nobody drains it?); dropping", "from", from, "dropped", dropped)
		}
		return
	}
	n.q = append(n.q, Notif{From: from, Msg: append([]byte(nil), msg...)})
	n.bytes += len(msg)
	n.mu.Unlock()
	select {
	case n.signal <- struct{}{}:
	default:
	}
}

func (n *notifQueue) drain() []Notif {
	n.mu.Lock()
	defer n.mu.Unlock()
	q := n.q
	n.q, n.bytes = nil, 0
	return q
}

// droppedCount is how many notifications were dropped so far.
func (n *notifQueue) droppedCount() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dropped
}
