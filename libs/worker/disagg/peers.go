package disagg

import (
	"sync"
	"time"
)

// DefaultMaxPeers is ExportConfig.MaxPeers' default.
const DefaultMaxPeers = 256

// peerSet remembers the decode agents an exporter has written to, so that
// those not used for the longest time are forgotten (their metadata and
// connections closed) once there are more than max: decode workers come
// and go under random names, and each left a peer behind for good.
type peerSet struct {
	max    int
	forget func(name string)

	mu   sync.Mutex
	last map[string]time.Time
	busy map[string]int // requests using the peer now: never forgotten
}

func newPeerSet(limit int, forget func(string)) *peerSet {
	return &peerSet{max: limit, forget: forget, last: map[string]time.Time{}, busy: map[string]int{}}
}

// use marks name in use by one request (until done) and forgets the least
// recently used idle peers beyond max.
func (s *peerSet) use(name string, now time.Time) {
	s.mu.Lock()
	s.last[name] = now
	s.busy[name]++
	var drop []string
	for len(s.last) > s.max {
		oldest, at := "", now
		for n, t := range s.last {
			if s.busy[n] == 0 && (oldest == "" || t.Before(at)) {
				oldest, at = n, t
			}
		}
		if oldest == "" {
			break // every peer is busy: keep them until they are not
		}
		delete(s.last, oldest)
		drop = append(drop, oldest)
	}
	s.mu.Unlock()
	for _, n := range drop {
		s.forget(n)
	}
}

// done ends one request's use of name.
func (s *peerSet) done(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.busy[name]--; s.busy[name] <= 0 {
		delete(s.busy, name)
	}
}
