// Package disctest is the contract every discovery backend passes. A backend
// test calls Run with a constructor; each subtest gets a fresh namespace.
package disctest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/discovery"
)

// NewFunc returns a registry over a namespace no other subtest uses.
type NewFunc func(t *testing.T) discovery.Registry

// Wait bounds every eventual condition in the suite; it is generous because
// CI machines are slow, and no test asserts how fast anything happened.
const Wait = 30 * time.Second

// Run runs the contract suite.
func Run(t *testing.T, newRegistry NewFunc) {
	tests := []struct {
		name string
		fn   func(t *testing.T, r discovery.Registry)
	}{
		{"RegisterThenList", testRegisterThenList},
		{"RolesAreSeparate", testRolesAreSeparate},
		{"WatchSeesChanges", testWatchSeesChanges},
		{"HealthHidesAndRestores", testHealth},
		{"SetMetaReachesWatchers", testSetMeta},
		{"DeregisterIsIdempotent", testDeregisterIdempotent},
		{"OwnerContextEndDeregisters", testOwnerContextEnd},
		{"InvalidInstanceRejected", testInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newRegistry(t))
		})
	}
}

// Instance returns a valid test instance.
func Instance(id, role string) discovery.Instance {
	return discovery.Instance{
		ID: id, Role: role, Model: "tiny-random", Version: "v1.2.3",
		Address: "127.0.0.1:9" + fmt.Sprint(100+len(id)%800),
		Tags:    []string{discovery.TagCanary, "zone-a"},
		Meta:    map[string]string{discovery.MetaKVBlocks: "1024", discovery.MetaBlockSize: "16"},
	}
}

// Eventually polls Instances until cond holds.
func Eventually(t *testing.T, r discovery.Registry, role string, cond func([]discovery.Instance) bool, what string) []discovery.Instance {
	t.Helper()
	deadline := time.Now().Add(Wait)
	var last []discovery.Instance
	var err error
	for time.Now().Before(deadline) {
		last, err = r.Instances(t.Context(), role)
		if err == nil && cond(last) {
			return last
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not reached within %v; last=%v err=%v", what, Wait, ids(last), err)
	return nil
}

func ids(ins []discovery.Instance) []string {
	out := make([]string, len(ins))
	for i, in := range ins {
		out[i] = in.ID
	}
	return out
}

// HasIDs returns a condition: exactly these ids, in order.
func HasIDs(want ...string) func([]discovery.Instance) bool {
	return func(ins []discovery.Instance) bool { return slices.Equal(ids(ins), want) }
}

func register(t *testing.T, r discovery.Registry, in discovery.Instance) discovery.Registration {
	t.Helper()
	reg, err := r.Register(t.Context(), in)
	if err != nil {
		t.Fatalf("Register(%s): %v", in.ID, err)
	}
	t.Cleanup(func() { _ = reg.Deregister(context.Background()) })
	return reg
}

func testRegisterThenList(t *testing.T, r discovery.Registry) {
	want := Instance("decode-a", discovery.RoleDecode)
	register(t, r, want)
	got := Eventually(t, r, discovery.RoleDecode, HasIDs("decode-a"), "registered instance listed")
	if !discovery.Equal(got, []discovery.Instance{want}) {
		t.Fatalf("listed %+v, want %+v", got[0], want)
	}
}

func testRolesAreSeparate(t *testing.T, r discovery.Registry) {
	register(t, r, Instance("router-1", discovery.RoleRouter))
	register(t, r, Instance("prefill-1", discovery.RolePrefill))
	register(t, r, Instance("prefill-0", discovery.RolePrefill))
	Eventually(t, r, discovery.RolePrefill, HasIDs("prefill-0", "prefill-1"), "prefill pool, sorted")
	Eventually(t, r, discovery.RoleRouter, HasIDs("router-1"), "router pool")
	Eventually(t, r, discovery.RolePlanner, HasIDs(), "empty role")
}

func next(t *testing.T, ch <-chan []discovery.Instance, cond func([]discovery.Instance) bool, what string) {
	t.Helper()
	timeout := time.After(Wait)
	for {
		select {
		case ins, ok := <-ch:
			if !ok {
				t.Fatalf("%s: watch closed", what)
			}
			if cond(ins) {
				return
			}
		case <-timeout:
			t.Fatalf("%s: not seen within %v", what, Wait)
		}
	}
}

func testWatchSeesChanges(t *testing.T, r discovery.Registry) {
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := r.Watch(ctx, discovery.RoleDecode)
	if err != nil {
		t.Fatal(err)
	}
	next(t, ch, HasIDs(), "initial empty set")
	a := register(t, r, Instance("decode-a", discovery.RoleDecode))
	next(t, ch, HasIDs("decode-a"), "after first register")
	register(t, r, Instance("decode-b", discovery.RoleDecode))
	next(t, ch, HasIDs("decode-a", "decode-b"), "after second register")
	if err := a.Deregister(t.Context()); err != nil {
		t.Fatal(err)
	}
	next(t, ch, HasIDs("decode-b"), "after deregister")
	cancel()
	for range ch {
	}
}

func testHealth(t *testing.T, r discovery.Registry) {
	reg := register(t, r, Instance("router-h", discovery.RoleRouter))
	Eventually(t, r, discovery.RoleRouter, HasIDs("router-h"), "passing instance listed")
	if err := reg.SetHealth(t.Context(), discovery.Critical); err != nil {
		t.Fatal(err)
	}
	Eventually(t, r, discovery.RoleRouter, HasIDs(), "critical instance hidden")
	if err := reg.SetHealth(t.Context(), discovery.Passing); err != nil {
		t.Fatal(err)
	}
	Eventually(t, r, discovery.RoleRouter, HasIDs("router-h"), "passing again")
}

func testDeregisterIdempotent(t *testing.T, r discovery.Registry) {
	reg := register(t, r, Instance("planner-1", discovery.RolePlanner))
	for i := range 2 {
		if err := reg.Deregister(t.Context()); err != nil {
			t.Fatalf("Deregister #%d: %v", i+1, err)
		}
	}
	Eventually(t, r, discovery.RolePlanner, HasIDs(), "gone after deregister")
}

func testOwnerContextEnd(t *testing.T, r discovery.Registry) {
	ctx, cancel := context.WithCancel(t.Context())
	if _, err := r.Register(ctx, Instance("kvbm-1", discovery.RoleKVBMController)); err != nil {
		t.Fatal(err)
	}
	Eventually(t, r, discovery.RoleKVBMController, HasIDs("kvbm-1"), "listed")
	cancel()
	Eventually(t, r, discovery.RoleKVBMController, HasIDs(), "gone after owner context ended")
}

func testInvalid(t *testing.T, r discovery.Registry) {
	bad := []discovery.Instance{
		{ID: "", Role: "decode", Address: "127.0.0.1:1"},
		{ID: "x y", Role: "decode", Address: "127.0.0.1:1"},
		{ID: "ok", Role: "decode", Address: "nohostport"},
		{ID: "ok", Role: "decode", Address: "127.0.0.1:99999"},
	}
	for _, in := range bad {
		if reg, err := r.Register(t.Context(), in); err == nil {
			_ = reg.Deregister(context.Background())
			t.Errorf("Register(%+v) succeeded, want error", in)
		}
	}
	Eventually(t, r, discovery.RoleDecode, HasIDs(), "nothing half-registered")
}

func testSetMeta(t *testing.T, r discovery.Registry) {
	in := Instance("decode-m", discovery.RoleDecode)
	reg := register(t, r, in)
	ch, err := r.Watch(t.Context(), in.Role)
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]string{discovery.MetaKVBlocks: "1024", "kv_load_ns": "host=84000"}
	if err := reg.SetMeta(t.Context(), meta); err != nil {
		t.Fatal(err)
	}
	next(t, ch, func(ins []discovery.Instance) bool {
		return len(ins) == 1 && maps.Equal(ins[0].Meta, meta) && ins[0].Model == in.Model && ins[0].Version == in.Version
	}, "the new meta, with model and version kept")
	if err := reg.Deregister(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := reg.SetMeta(t.Context(), meta); !errors.Is(err, discovery.ErrNotFound) {
		t.Fatalf("SetMeta after Deregister: %v; want ErrNotFound", err)
	}
}
