package worker

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"

	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/nixl/metadata"
)

// fakeRegistry serves Instances from a list the test sets; it counts
// lookups. Watch is not used (the guard's update is called directly).
type fakeRegistry struct {
	discovery.Registry
	ins     []discovery.Instance
	err     error
	lookups int
}

func (f *fakeRegistry) Instances(context.Context, string) ([]discovery.Instance, error) {
	f.lookups++
	return f.ins, f.err
}

func decode(id string, md *metadata.Agent) discovery.Instance {
	return discovery.Instance{ID: id, Role: discovery.RoleDecode, Meta: map[string]string{MetaKVTransfer: md.Endpoints()}}
}

func TestTargetGuard(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	reg := &fakeRegistry{}
	g := &targetGuard{reg: reg, log: slog.New(slog.DiscardHandler), now: func() time.Time { return now }, known: map[string]target{}}
	a := &metadata.Agent{Name: "decode-a", Epoch: 1, Backends: []metadata.Backend{{Name: "tcp", Address: []byte("10.0.0.1:1")}}}
	forged := &metadata.Agent{Name: "decode-a", Epoch: 1, Backends: []metadata.Backend{{Name: "tcp", Address: []byte("10.6.6.6:1")}}}
	ctx := t.Context()

	// Listed by the watch: admitted at its own endpoints only.
	g.update([]discovery.Instance{decode("decode-a", a)})
	if err := g.check(ctx, a); err != nil {
		t.Fatalf("listed target refused: %v", err)
	}
	if err := g.check(ctx, forged); !errors.Is(err, errNotATarget) {
		t.Fatalf("forged endpoints: %v, want a refusal", err)
	}
	// A refusal looked discovery up once; another within the second does
	// not look again.
	if err := g.check(ctx, forged); !errors.Is(err, errNotATarget) || reg.lookups != 1 {
		t.Fatalf("second forged request: %v after %d lookups, want a refusal and 1 lookup", err, reg.lookups)
	}

	// A decode worker the watch has not seen yet is found by a lookup.
	b := &metadata.Agent{Name: "decode-b", Epoch: 2}
	reg.ins = []discovery.Instance{decode("decode-a", a), decode("decode-b", b)}
	now = now.Add(2 * time.Second)
	if err := g.check(ctx, b); err != nil {
		t.Fatalf("new decode worker refused: %v", err)
	}

	// A worker that left discovery (shutting down: grace, then drain) is
	// still admitted for targetRetain, then not.
	g.update(nil)
	now = now.Add(targetRetain / 2)
	g.update(nil)
	if err := g.check(ctx, a); err != nil {
		t.Fatalf("a worker that left half a retention ago refused: %v", err)
	}
	now = now.Add(targetRetain)
	g.update(nil)
	reg.ins = nil
	if err := g.check(ctx, a); !errors.Is(err, errNotATarget) {
		t.Fatalf("a worker gone for longer than the retention: %v, want a refusal", err)
	}

	// A lookup that fails is Unavailable, not a refusal.
	reg.err = errors.New("consul is down")
	now = now.Add(2 * time.Second)
	if err := g.check(ctx, b); connect.CodeOf(err) != connect.CodeUnavailable {
		t.Fatalf("failed lookup: %v, want Unavailable", err)
	}
}
