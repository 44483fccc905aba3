package nixl

import "sync"

// notifQueue is unbounded so a slow consumer never stalls a backend's
// receive path; signal has room for one pending wake-up.
type notifQueue struct {
	mu     sync.Mutex
	q      []Notif
	signal chan struct{}
}

func (n *notifQueue) init() { n.signal = make(chan struct{}, 1) }

func (n *notifQueue) push(from string, msg []byte) {
	n.mu.Lock()
	n.q = append(n.q, Notif{From: from, Msg: append([]byte(nil), msg...)})
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
	n.q = nil
	return q
}
