package nixl

import (
	"log/slog"
	"testing"
)

// The queue keeps notifications up to its bounds, drops (and counts) the
// rest, and takes more again once drained.
func TestNotifQueueBounds(t *testing.T) {
	var n notifQueue
	n.init(slog.New(slog.DiscardHandler))
	for range MaxQueuedNotifs + 3 {
		n.push("p", []byte("x"))
	}
	if got := n.droppedCount(); got != 3 {
		t.Fatalf("dropped %d, want 3", got)
	}
	if q := n.drain(); len(q) != MaxQueuedNotifs || q[0].From != "p" || string(q[0].Msg) != "x" {
		t.Fatalf("drained %d", len(q))
	}
	big := make([]byte, MaxQueuedNotifBytes/2)
	n.push("p", big)
	n.push("p", big)
	n.push("p", []byte("y")) // one byte over
	if got := n.droppedCount(); got != 4 {
		t.Fatalf("dropped %d, want 4 (the bytes bound)", got)
	}
	if q := n.drain(); len(q) != 2 {
		t.Fatalf("drained %d, want 2", len(q))
	}
	n.push("p", []byte("z"))
	if q := n.drain(); len(q) != 1 || string(q[0].Msg) != "z" {
		t.Fatalf("after draining: %v", q)
	}
}
