package consuldisc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/discovery/consuldisc"
	"switchyard.dev/libs/mesh/discovery/disctest"
)

func newRegistry(t *testing.T, addr, prefix string) *consuldisc.Registry {
	t.Helper()
	r, err := consuldisc.New(t.Context(), consuldisc.Config{
		Address: addr, ServicePrefix: prefix, CheckTTL: 2 * time.Second,
		WatchWait: 2 * time.Second, MaxBackoff: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestContract(t *testing.T) {
	t.Parallel()
	c := deptest.StartConsul(t)
	var n atomic.Int64
	disctest.Run(t, func(t *testing.T) discovery.Registry {
		return newRegistry(t, c.Addr, fmt.Sprintf("t%d-", n.Add(1)))
	})
}

// After the agent restarts and forgets everything, the reconcile loop
// registers the instance again and watchers see it again.
func TestReregistersAfterConsulRestart(t *testing.T) {
	t.Parallel()
	c := deptest.StartConsul(t)
	r := newRegistry(t, c.Addr, "restart-")
	if _, err := r.Register(t.Context(), disctest.Instance("decode-r", discovery.RoleDecode)); err != nil {
		t.Fatal(err)
	}
	ch, err := r.Watch(t.Context(), discovery.RoleDecode)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, 1)
	c.Stop()
	c.Start()
	c.WaitLeader(t)
	disctest.Eventually(t, r, discovery.RoleDecode, disctest.HasIDs("decode-r"), "re-registered after restart")
	// The watch survived the restart: it sees a change made afterwards. (It
	// need not report decode-r again: if the re-registration beat the
	// watch's reconnect, nothing changed from its point of view.)
	if _, err := r.Register(t.Context(), disctest.Instance("decode-s", discovery.RoleDecode)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, 2)
}

func waitFor(t *testing.T, ch <-chan []discovery.Instance, n int) {
	t.Helper()
	timeout := time.After(disctest.Wait)
	for {
		select {
		case ins := <-ch:
			if len(ins) == n {
				return
			}
		case <-timeout:
			t.Fatalf("watch never showed %d instances", n)
		}
	}
}

func TestUnreachableConsulIsAClearError(t *testing.T) {
	t.Parallel()
	addr := fmt.Sprintf("127.0.0.1:%d", deptest.FreePort(t))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := consuldisc.New(ctx, consuldisc.Config{Address: addr})
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("New(%s) = %v; want an error naming the address", addr, err)
	}
}

func TestBadMetaKeyRejected(t *testing.T) {
	t.Parallel()
	c := deptest.StartConsul(t)
	r := newRegistry(t, c.Addr, "meta-")
	in := disctest.Instance("decode-m", discovery.RoleDecode)
	in.Meta = map[string]string{"bad key!": "x"}
	if _, err := r.Register(t.Context(), in); err == nil {
		t.Fatal("Register with a bad meta key succeeded")
	}
}

// Two processes given one id on one agent: the second registration is
// refused while the first is passing, and the first's deregistration does
// not remove a registration that replaced it.
func TestIDOwnership(t *testing.T) {
	t.Parallel()
	c := deptest.StartConsul(t)
	r := newRegistry(t, c.Addr, "own-")
	first, err := r.Register(t.Context(), disctest.Instance("decode-0", discovery.RoleDecode))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Register(t.Context(), disctest.Instance("decode-0", discovery.RoleDecode)); !errors.Is(err, discovery.ErrIDTaken) {
		t.Fatalf("second registration of a passing id: %v, want ErrIDTaken", err)
	}
	// The first goes critical (draining): a replacement may take the id.
	if err := first.SetHealth(t.Context(), discovery.Critical); err != nil {
		t.Fatal(err)
	}
	in := disctest.Instance("decode-0", discovery.RoleDecode)
	in.Version = "new"
	if _, err := r.Register(t.Context(), in); err != nil {
		t.Fatalf("replacing a critical instance: %v", err)
	}
	if err := first.Deregister(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := disctest.Eventually(t, r, discovery.RoleDecode, disctest.HasIDs("decode-0"), "the replacement still registered")
	if got[0].Version != "new" {
		t.Fatalf("registered %+v, want the replacement", got[0])
	}
}

// Two meshes (service prefixes) sharing one agent may use the same
// instance ids: each registers and lists its own, and deregistering one
// leaves the other (service ids are unique per agent, so each mesh's
// carry its prefix).
func TestMeshesShareAnAgent(t *testing.T) {
	t.Parallel()
	c := deptest.StartConsul(t)
	blue, green := newRegistry(t, c.Addr, "blue-"), newRegistry(t, c.Addr, "green-")
	regs := map[string]discovery.Registration{}
	for name, r := range map[string]*consuldisc.Registry{"blue": blue, "green": green} {
		in := disctest.Instance("decode-0", discovery.RoleDecode)
		in.Version = name
		g, err := r.Register(t.Context(), in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		regs[name] = g
	}
	for name, r := range map[string]*consuldisc.Registry{"blue": blue, "green": green} {
		got := disctest.Eventually(t, r, discovery.RoleDecode, disctest.HasIDs("decode-0"), name+" lists its instance")
		if got[0].Version != name {
			t.Fatalf("%s lists %+v, want its own", name, got[0])
		}
	}
	if err := regs["blue"].Deregister(t.Context()); err != nil {
		t.Fatal(err)
	}
	disctest.Eventually(t, blue, discovery.RoleDecode, disctest.HasIDs(), "blue's instance gone")
	if got := disctest.Eventually(t, green, discovery.RoleDecode, disctest.HasIDs("decode-0"), "green's instance stays"); got[0].Version != "green" {
		t.Fatalf("green lists %+v", got[0])
	}
}
