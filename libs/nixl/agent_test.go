package nixl_test

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/backend/local"
	"switchyard.dev/libs/nixl/backend/tcp"
	"switchyard.dev/libs/nixl/metadata"
)

// versioned is a backend under another wire name: another version of its
// protocol (nixl.WireNamer).
type versioned struct {
	nixl.Backend
	wire string
}

func (v versioned) WireName() string { return v.wire }

// withWire gives the backends f builds the wire name wire ("" keeps
// theirs).
func withWire(f nixl.BackendFactory, wire string) nixl.BackendFactory {
	return func(env nixl.Env) (nixl.Backend, error) {
		b, err := f(env)
		if err != nil || wire == "" {
			return b, err
		}
		return versioned{b, wire}, nil
	}
}

// TestBackendChoice: the first backend in preference order that both
// peers advertise under the same wire name wins.
func TestBackendChoice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		pref         []string
		wireA, wireB string // the local backend's wire name on a and b
		want         string
	}{
		{"default prefers tcp over local", nil, "", "", tcp.Name},
		{"explicit local first", []string{"local", "tcp"}, "", "", local.Name},
		{"local in two protocol versions: tcp", []string{"local", "tcp"}, "", "local-v2", tcp.Name},
		{"local in the same newer version", []string{"local", "tcp"}, "local-v2", "local-v2", local.Name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := local.NewRegistry()
			mk := func(name, wire string) *nixl.Agent {
				a, err := nixl.NewAgent(nixl.Config{Name: name, Preference: tc.pref,
					Backends: []nixl.BackendFactory{withWire(local.New(reg), wire), tcp.New(tcp.Config{})}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = a.Close() })
				return a
			}
			a, b := mk("a", tc.wireA), mk("b", tc.wireB)
			ar, err := arena.Map(4096)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ar.Close() })
			if _, err := b.RegisterMemory(ar.Bytes()); err != nil {
				t.Fatal(err)
			}
			md, err := b.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.LoadRemoteMetadata(md); err != nil {
				t.Fatal(err)
			}
			x, err := a.Post(nixl.XferRequest{Op: nixl.Write, Peer: "b", Notif: []byte("hi")})
			if err != nil {
				t.Fatal(err)
			}
			if err := x.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := a.Backend("b"); got != tc.want {
				t.Fatalf("backend = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestMetadataGenerations: a peer keeps the newest blob of a run whatever
// order blobs arrive in, and a deregistered region (a revoked window) takes
// no more writes even from a peer that has not heard of it: the target
// rejects them and its memory stays as it was.
func TestMetadataGenerations(t *testing.T) {
	t.Parallel()
	mk := func(name string) *nixl.Agent {
		a, err := nixl.NewAgent(nixl.Config{Name: name, Backends: []nixl.BackendFactory{tcp.New(tcp.Config{})}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Close() })
		return a
	}
	a, b := mk("a"), mk("b")
	ar, err := arena.Map(8192)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ar.Close() })
	src, err := a.RegisterMemory(ar.Bytes()[:4096])
	if err != nil {
		t.Fatal(err)
	}
	mem := ar.Bytes()[4096:]
	whole, err := b.RegisterMemory(mem)
	if err != nil {
		t.Fatal(err)
	}
	stale, err := b.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	window, err := b.RegisterMemory(mem[1024:2048]) // an alias of part of whole
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := b.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	for _, md := range [][]byte{fresh, stale} { // the stale blob arrives last
		if _, err := a.LoadRemoteMetadata(md); err != nil {
			t.Fatal(err)
		}
	}
	write := func(region nixl.RegionID, fill byte) error {
		copy(ar.Bytes()[:64], bytes.Repeat([]byte{fill}, 64))
		x, err := a.Post(nixl.XferRequest{Op: nixl.Write, Peer: "b",
			Local:  []nixl.Desc{{Region: src, Len: 64}},
			Remote: []nixl.Desc{{Region: region, Len: 64}}})
		if err != nil {
			return err
		}
		return x.Wait(t.Context())
	}
	if err := write(window, 1); err != nil {
		t.Fatalf("write into the window, stale blob loaded last: %v", err)
	}
	if mem[1024] != 1 {
		t.Fatal("the write did not land at the window's start")
	}
	if err := b.DeregisterMemory(t.Context(), window); err != nil {
		t.Fatal(err)
	}
	// a still holds the blob listing the window: the target must refuse.
	if err := write(window, 2); !errors.Is(err, nixl.ErrRemote) || !errors.Is(err, nixl.ErrUnknownRegion) {
		t.Fatalf("late write into a revoked window: %v, want ErrRemote and ErrUnknownRegion", err)
	}
	if mem[1024] != 1 {
		t.Fatal("a late write landed in a revoked window")
	}
	// With fresh metadata the initiator refuses at post time.
	md, err := b.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.LoadRemoteMetadata(md); err != nil {
		t.Fatal(err)
	}
	if err := write(window, 3); !errors.Is(err, nixl.ErrUnknownRegion) {
		t.Fatalf("post to a deregistered region: %v, want ErrUnknownRegion", err)
	}
	if err := write(whole, 4); err != nil || mem[0] != 4 {
		t.Fatalf("write into the whole region: %v", err)
	}
}

// gated is a backend whose Connect to peer slow waits for open, telling
// dialing when it starts; the connections it makes report their Close.
type gated struct {
	nixl.Backend
	slow          string
	dialing, open chan struct{}
	closed        chan string
}

func (g gated) Connect(p nixl.PeerInfo) (nixl.Conn, error) {
	if p.Name == g.slow {
		close(g.dialing)
		<-g.open
	}
	c, err := g.Backend.Connect(p)
	if err != nil {
		return nil, err
	}
	return closeSpy{c, p.Name, g.closed}, nil
}

// gatedAgent is agent "a" on a gated local backend (peer "slow" is slow).
func gatedAgent(t *testing.T, reg *local.Registry) (*nixl.Agent, gated) {
	t.Helper()
	g := gated{slow: "slow", dialing: make(chan struct{}), open: make(chan struct{}), closed: make(chan string, 4)}
	a, err := nixl.NewAgent(nixl.Config{Name: "a", Backends: []nixl.BackendFactory{func(env nixl.Env) (nixl.Backend, error) {
		be, err := local.New(reg)(env)
		g.Backend = be
		return g, err
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a, g
}

type closeSpy struct {
	nixl.Conn
	peer   string
	closed chan string
}

func (c closeSpy) Close() error {
	c.closed <- c.peer
	return c.Conn.Close()
}

// TestSlowDialHoldsOnlyItsPeer: while a connection to one peer is being
// dialed, the agent's other peers take metadata and transfers (the dial
// held the agent's lock, up to a tcp I/O timeout); a peer invalidated
// during its dial gets no connection, and the one dialed is closed, not
// leaked.
func TestSlowDialHoldsOnlyItsPeer(t *testing.T) {
	t.Parallel()
	reg := local.NewRegistry()
	a, g := gatedAgent(t, reg)
	var mds [][]byte
	for _, name := range []string{"slow", "fast"} {
		p, err := nixl.NewAgent(nixl.Config{Name: name, Backends: []nixl.BackendFactory{local.New(reg)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		md, err := p.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.LoadRemoteMetadata(md); err != nil {
			t.Fatal(err)
		}
		mds = append(mds, md)
	}
	slowErr := make(chan error, 1)
	go func() {
		_, err := a.Post(nixl.XferRequest{Op: nixl.Write, Peer: "slow", Notif: []byte("x")})
		slowErr <- err
	}()
	<-g.dialing
	done := make(chan error, 1)
	go func() {
		if _, err := a.LoadRemoteMetadata(mds[1]); err != nil {
			done <- err
			return
		}
		x, err := a.Post(nixl.XferRequest{Op: nixl.Write, Peer: "fast", Notif: []byte("y")})
		if err == nil {
			err = x.Wait(t.Context())
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // a hang guard, not a speed check
		close(g.open) // let the dial end, so the agent can close
		t.Fatal("another peer's calls waited for the slow dial")
	}
	a.Invalidate("slow")
	close(g.open)
	if err := <-slowErr; !errors.Is(err, nixl.ErrPeerGone) {
		t.Fatalf("post to the peer invalidated mid-dial: %v, want ErrPeerGone", err)
	}
	if got := <-g.closed; got != "slow" {
		t.Fatalf("closed the connection to %q, want the one dialed to slow", got)
	}
}

// Metadata of the same peer reloaded while it is being dialed (every
// remote prefill brings a newer blob) does not fail the transfer: the new
// entry, same endpoint, takes the connection.
func TestDialSurvivesMetadataReload(t *testing.T) {
	t.Parallel()
	reg := local.NewRegistry()
	a, g := gatedAgent(t, reg)
	slow, err := nixl.NewAgent(nixl.Config{Name: "slow", Backends: []nixl.BackendFactory{local.New(reg)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = slow.Close() })
	md, err := slow.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.LoadRemoteMetadata(md); err != nil {
		t.Fatal(err)
	}
	posted := make(chan error, 1)
	go func() {
		x, err := a.Post(nixl.XferRequest{Op: nixl.Write, Peer: "slow", Notif: []byte("x")})
		if err == nil {
			err = x.Wait(t.Context())
		}
		posted <- err
	}()
	<-g.dialing
	ar, err := arena.Map(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ar.Close() })
	if _, err := slow.RegisterMemory(ar.Bytes()); err != nil { // a newer generation of its metadata
		t.Fatal(err)
	}
	md2, err := slow.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.LoadRemoteMetadata(md2); err != nil {
		t.Fatal(err)
	}
	close(g.open)
	if err := <-posted; err != nil {
		t.Fatalf("transfer across a metadata reload: %v", err)
	}
	select {
	case p := <-g.closed:
		t.Fatalf("connection to %s closed; the reloaded entry should have taken it", p)
	default:
	}
	if got := a.Backend("slow"); got != local.Name {
		t.Fatalf("backend %q after the reload", got)
	}
}

// failing is a backend that can be failed for good, as the UCX backend
// is when its UCX process dies (nixl.Failer).
type failing struct {
	nixl.Backend
	env  nixl.Env
	dead atomic.Bool
}

func (f *failing) Failed() error {
	if f.dead.Load() {
		return errors.New("gone")
	}
	return nil
}

func (f *failing) fail() {
	f.dead.Store(true)
	f.env.Lost(errors.New("gone"))
}

// TestLostBackend: a backend that fails for good leaves the agent's
// metadata in a newer generation, is not connected over again, and the
// agent says its endpoints changed; transfers go over the next backend.
func TestLostBackend(t *testing.T) {
	t.Parallel()
	reg := local.NewRegistry()
	var lossy *failing
	changed := make(chan struct{}, 1)
	a, err := nixl.NewAgent(nixl.Config{Name: "a", Preference: []string{"local", "tcp"}, OnChange: func() { changed <- struct{}{} },
		Backends: []nixl.BackendFactory{func(env nixl.Env) (nixl.Backend, error) {
			b, err := local.New(reg)(env)
			lossy = &failing{Backend: b, env: env}
			return lossy, err
		}, tcp.New(tcp.Config{})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	b, err := nixl.NewAgent(nixl.Config{Name: "b", Preference: []string{"local", "tcp"},
		Backends: []nixl.BackendFactory{local.New(reg), tcp.New(tcp.Config{})}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	ar, err := arena.Map(4096)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ar.Close() })
	if _, err := b.RegisterMemory(ar.Bytes()); err != nil {
		t.Fatal(err)
	}
	load := func(from, to *nixl.Agent) {
		md, err := from.Metadata()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := to.LoadRemoteMetadata(md); err != nil {
			t.Fatal(err)
		}
	}
	load(b, a)
	send := func() string {
		x, err := a.Post(nixl.XferRequest{Op: nixl.Write, Peer: "b", Notif: []byte("hi")})
		if err != nil {
			t.Fatal(err)
		}
		if err := x.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		return a.Backend("b")
	}
	if got := send(); got != local.Name {
		t.Fatalf("before the loss: %q, want local", got)
	}
	before, endpoints := mustDecode(t, a), a.Endpoints()
	lossy.fail()
	<-changed
	after := mustDecode(t, a)
	if _, ok := after.Backend(local.Name); ok || after.Gen <= before.Gen || a.Endpoints() == endpoints {
		t.Fatalf("after the loss: local advertised %v, generation %d → %d, endpoints changed %v",
			ok, before.Gen, after.Gen, a.Endpoints() != endpoints)
	}
	a.Invalidate("b") // the connection over local breaks as the backend dies
	load(b, a)
	if got := send(); got != tcp.Name {
		t.Fatalf("after the loss: %q, want tcp", got)
	}
}

func mustDecode(t *testing.T, a *nixl.Agent) *metadata.Agent {
	t.Helper()
	blob, err := a.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	md, err := metadata.Decode(blob)
	if err != nil {
		t.Fatal(err)
	}
	return md
}
