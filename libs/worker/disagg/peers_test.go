package disagg

import (
	"slices"
	"testing"
	"time"
)

// Beyond max, the least recently used idle peers are forgotten; a peer in
// use by a request is kept whatever its age.
func TestPeerSetForgetsIdleLRU(t *testing.T) {
	t.Parallel()
	var forgot []string
	s := newPeerSet(2, func(n string) { forgot = append(forgot, n) })
	t0 := time.Unix(0, 0)
	s.use("a", t0)
	s.done("a")
	s.use("b", t0.Add(time.Second)) // b stays busy
	s.use("c", t0.Add(2*time.Second))
	s.done("c")
	if !slices.Equal(forgot, []string{"a"}) {
		t.Fatalf("forgot %v, want [a] (the least recently used idle peer)", forgot)
	}
	s.use("d", t0.Add(3*time.Second)) // b is older than c but busy: c goes
	s.done("d")
	if !slices.Equal(forgot, []string{"a", "c"}) {
		t.Fatalf("forgot %v, want [a c]", forgot)
	}
	s.done("b")
	s.use("e", t0.Add(4*time.Second)) // now b, idle and oldest, goes
	if !slices.Equal(forgot, []string{"a", "c", "b"}) {
		t.Fatalf("forgot %v, want [a c b]", forgot)
	}
	s.use("e", t0.Add(5*time.Second)) // a known peer: nothing more goes
	if len(forgot) != 3 {
		t.Fatalf("forgot %v after reusing a known peer", forgot)
	}
}
