package filedisc_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/discovery/disctest"
	"switchyard.dev/libs/mesh/discovery/filedisc"
)

func newRegistry(t *testing.T, dir string) *filedisc.Registry {
	t.Helper()
	r, err := filedisc.New(filedisc.Config{Dir: dir, Lease: 600 * time.Millisecond, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestContract(t *testing.T) {
	t.Parallel()
	disctest.Run(t, func(t *testing.T) discovery.Registry { return newRegistry(t, t.TempDir()) })
}

// A record left by a process that died is not listed, even within its lease.
func TestDeadProcessIsNotListed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := newRegistry(t, dir)
	host, _ := os.Hostname()
	rec := map[string]any{
		"id": "decode-dead", "role": "decode", "version": "v1", "address": "127.0.0.1:9000",
		"pid": 1 << 22, "host": host, "expires": time.Now().Add(time.Hour),
	}
	b, _ := json.Marshal(rec)
	if err := os.MkdirAll(filepath.Join(dir, "decode"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "decode", "decode-dead.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := r.Instances(t.Context(), "decode")
	if err != nil || len(got) != 0 {
		t.Fatalf("Instances = %v, %v; want none (pid is not running)", got, err)
	}
}

// An expired lease is not listed; a renewing registration outlives many leases.
func TestLeaseRenewalAndExpiry(t *testing.T) {
	t.Parallel()
	// On synctest's virtual clock: the leases pass at once, and exactly.
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		r := newRegistry(t, dir)
		reg, err := r.Register(t.Context(), disctest.Instance("router-1", discovery.RoleRouter))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = reg.Deregister(t.Context()) }()
		time.Sleep(3 * 600 * time.Millisecond) // several leases: renewal keeps it listed
		disctest.Eventually(t, r, discovery.RoleRouter, disctest.HasIDs("router-1"), "renewed record listed")

		stale := map[string]any{"id": "router-old", "role": "router", "version": "v1", "address": "127.0.0.1:9001",
			"pid": os.Getpid(), "expires": time.Now().Add(-time.Second)}
		b, _ := json.Marshal(stale)
		if err := os.WriteFile(filepath.Join(dir, "router", "router-old.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		disctest.Eventually(t, r, discovery.RoleRouter, disctest.HasIDs("router-1"), "expired record ignored")
		if _, err := os.Stat(filepath.Join(dir, "router", "router-old.json")); err != nil {
			t.Fatalf("a record expired one second ago is gone already: %v", err)
		}

		// Long expired (ten leases and more): removed, so dead instances do
		// not pile up.
		stale["expires"] = time.Now().Add(-time.Hour)
		b, _ = json.Marshal(stale)
		if err := os.WriteFile(filepath.Join(dir, "router", "router-old.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Instances(t.Context(), discovery.RoleRouter); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "router", "router-old.json")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("a record expired an hour ago is still there: %v", err)
		}
	})
}

// Garbage in the directory is skipped, never fatal.
func TestGarbageRecordsSkipped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := newRegistry(t, dir)
	if err := os.MkdirAll(filepath.Join(dir, "decode"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "decode", "junk.json"), []byte("{not json"), 0o644)
	if got, err := r.Instances(t.Context(), "decode"); err != nil || len(got) != 0 {
		t.Fatalf("Instances = %v, %v", got, err)
	}
}

func TestNewRejectsEmptyDir(t *testing.T) {
	t.Parallel()
	if _, err := filedisc.New(filedisc.Config{}); err == nil {
		t.Fatal("New with empty dir succeeded")
	}
}

// A second registration of an id held by a live instance is refused; one
// that takes over an id whose holder stopped renewing keeps it: the old
// holder can neither mark it critical nor remove it.
func TestIDOwnership(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := newRegistry(t, dir)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	old, err := r.Register(ctx, disctest.Instance("decode-0", discovery.RoleDecode))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Register(ctx, disctest.Instance("decode-0", discovery.RoleDecode)); !errors.Is(err, discovery.ErrIDTaken) {
		t.Fatalf("second live registration of decode-0: %v, want ErrIDTaken", err)
	}
	// The holder stops renewing (paused, or its host partitioned) and its
	// lease runs out; another instance takes the id.
	b, err := os.ReadFile(filepath.Join(dir, "decode", "decode-0.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	rec["expires"] = time.Now().Add(-time.Second)
	b, _ = json.Marshal(rec)
	if err := os.WriteFile(filepath.Join(dir, "decode", "decode-0.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	in := disctest.Instance("decode-0", discovery.RoleDecode)
	in.Version = "new"
	if _, err := r.Register(ctx, in); err != nil {
		t.Fatalf("taking over an expired id: %v", err)
	}
	if err := old.SetHealth(ctx, discovery.Critical); err == nil {
		t.Error("the old holder marked the new record critical")
	}
	if err := old.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := r.Instances(ctx, discovery.RoleDecode)
	if err != nil || len(got) != 1 || got[0].Version != "new" {
		t.Fatalf("after the old holder left: %v %v, want the new record", got, err)
	}
}

// With the whole discovery directory removed under running services,
// listing fails (watchers keep their last list) instead of answering "no
// instances", until renewals write the records back. A missing role
// directory alone is an empty role.
func TestDirectoryRemoved(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "disc")
	r := newRegistry(t, dir)
	if ins, err := r.Instances(t.Context(), discovery.RoleDecode); err != nil || len(ins) != 0 {
		t.Fatalf("a role nobody registered: %v, %v; want an empty list", ins, err)
	}
	reg, err := r.Register(t.Context(), discovery.Instance{ID: "decode-a", Role: discovery.RoleDecode, Version: "v1", Address: "127.0.0.1:9000"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Deregister(context.Background()) }()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if ins, err := r.Instances(t.Context(), discovery.RoleDecode); err == nil {
		// The renewal may already have written it back.
		if _, statErr := os.Stat(dir); statErr != nil || len(ins) != 1 {
			t.Fatalf("directory gone: listed %v with no error", ins)
		}
	}
	deptest.Eventually(t, 10*time.Second, "record written back", func() bool {
		ins, err := r.Instances(t.Context(), discovery.RoleDecode)
		return err == nil && len(ins) == 1
	})
}

// A listing keeps a record it saw that vanished from disk without a
// tombstone (its directory removed under running services and not yet
// written back by its renewal) until its lease ends, instead of answering
// "none of the role" in between; a deregistration's tombstone drops it at
// once.
func TestVanishedRecordKeptUntilLease(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A lease long enough that no renewal (every third of it) runs in the
	// test: only the registry's memory can keep the record listed.
	r, err := filedisc.New(filedisc.Config{Dir: dir, Lease: time.Minute, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := r.Register(t.Context(), disctest.Instance("decode-a", discovery.RoleDecode))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Deregister(context.Background()) }()
	if ins, err := r.Instances(t.Context(), discovery.RoleDecode); err != nil || len(ins) != 1 {
		t.Fatalf("registered: %v, %v", ins, err)
	}
	// The whole directory removed, then recreated by another role's
	// renewal: the decode role's directory is missing.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, discovery.RoleRouter), 0o755); err != nil {
		t.Fatal(err)
	}
	if ins, err := r.Instances(t.Context(), discovery.RoleDecode); err != nil || len(ins) != 1 || ins[0].ID != "decode-a" {
		t.Fatalf("record vanished within its lease: listed %v, %v; want decode-a kept", ins, err)
	}
	// Another registry (another process) never saw it: for it the role is
	// empty, as nothing on disk says otherwise.
	if ins, err := newRegistry(t, dir).Instances(t.Context(), discovery.RoleDecode); err != nil || len(ins) != 0 {
		t.Fatalf("a registry that never saw the record: %v, %v", ins, err)
	}
	// The record written back (as its renewal would), then deregistered:
	// its tombstone drops it at once. (Deregistering while the record is
	// missing writes no tombstone, so another registry that kept it keeps
	// it to its lease's end, as it would a crashed instance on another
	// host; TestDeregisterVanishedRecord.)
	if err := reg.SetHealth(t.Context(), discovery.Passing); err != nil {
		t.Fatal(err)
	}
	if err := reg.Deregister(t.Context()); err != nil {
		t.Fatal(err)
	}
	if ins, err := r.Instances(t.Context(), discovery.RoleDecode); err != nil || len(ins) != 0 {
		t.Fatalf("after deregistering: %v, %v; want none at once", ins, err)
	}
	// The tombstone frees the id at once.
	again, err := r.Register(t.Context(), disctest.Instance("decode-a", discovery.RoleDecode))
	if err != nil {
		t.Fatalf("re-registering a deregistered id: %v", err)
	}
	defer func() { _ = again.Deregister(context.Background()) }()
	if ins, err := r.Instances(t.Context(), discovery.RoleDecode); err != nil || len(ins) != 1 {
		t.Fatalf("re-registered: %v, %v", ins, err)
	}
}

// Deregistering a record that vanished from disk writes no tombstone (no
// file appears in a directory being removed), but the registry that
// deregistered it stops listing it at once; another registry that saw it
// keeps it to its lease's end.
func TestDeregisterVanishedRecord(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func() *filedisc.Registry {
		r, err := filedisc.New(filedisc.Config{Dir: dir, Lease: time.Minute, PollInterval: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r, other := open(), open()
	reg, err := r.Register(t.Context(), disctest.Instance("decode-a", discovery.RoleDecode))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*filedisc.Registry{r, other} {
		if ins, err := x.Instances(t.Context(), discovery.RoleDecode); err != nil || len(ins) != 1 {
			t.Fatalf("registered: %v, %v", ins, err)
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, discovery.RoleDecode)); err != nil {
		t.Fatal(err)
	}
	if err := reg.Deregister(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, discovery.RoleDecode)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("deregistering a vanished record touched the removed directory: %v", err)
	}
	if ins, err := r.Instances(t.Context(), discovery.RoleDecode); err != nil || len(ins) != 0 {
		t.Fatalf("the deregistering registry: %v, %v; want none at once", ins, err)
	}
	if ins, err := other.Instances(t.Context(), discovery.RoleDecode); err != nil || len(ins) != 1 {
		t.Fatalf("another registry that saw it: %v, %v; want it kept within its lease", ins, err)
	}
}

// A record whose process died is not kept when it vanishes, and a
// tombstone is removed like any dead record once it is staleLeases old.
func TestVanishedDeadRecordAndOldTombstone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := newRegistry(t, dir)
	host, _ := os.Hostname()
	write := func(name string, rec map[string]any) {
		t.Helper()
		b, _ := json.Marshal(rec)
		if err := os.MkdirAll(filepath.Join(dir, "decode"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "decode", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A live record of this process, seen, then removed by hand with the
	// process still there: kept.
	write("decode-x.json", map[string]any{"id": "decode-x", "role": "decode", "version": "v1", "address": "127.0.0.1:9000",
		"pid": os.Getpid(), "host": host, "expires": time.Now().Add(time.Hour)})
	if ins, err := r.Instances(t.Context(), "decode"); err != nil || len(ins) != 1 {
		t.Fatalf("listed %v, %v", ins, err)
	}
	if err := os.Remove(filepath.Join(dir, "decode", "decode-x.json")); err != nil {
		t.Fatal(err)
	}
	if ins, err := r.Instances(t.Context(), "decode"); err != nil || len(ins) != 1 {
		t.Fatalf("vanished live record: %v, %v; want it kept", ins, err)
	}
	// A record of a process that then exits, and whose record vanishes:
	// not kept (a crash deregisters at once on this host).
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	write("decode-child.json", map[string]any{"id": "decode-child", "role": "decode", "version": "v1", "address": "127.0.0.1:9001",
		"pid": child.Process.Pid, "host": host, "expires": time.Now().Add(time.Hour)})
	if ins, err := r.Instances(t.Context(), "decode"); err != nil || len(ins) != 2 {
		t.Fatalf("with the child's record: %v, %v", ins, err)
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	if err := os.Remove(filepath.Join(dir, "decode", "decode-child.json")); err != nil {
		t.Fatal(err)
	}
	if ins, err := r.Instances(t.Context(), "decode"); err != nil || len(ins) != 1 || ins[0].ID != "decode-x" {
		t.Fatalf("the child exited and its record vanished: %v, %v; want decode-x only", ins, err)
	}
	// An old tombstone is removed from disk by a listing.
	write("decode-old.json", map[string]any{"id": "decode-old", "role": "decode", "version": "v1", "address": "127.0.0.1:9002",
		"pid": os.Getpid(), "host": host, "expires": time.Now().Add(-time.Hour), "gone": true})
	if _, err := r.Instances(t.Context(), "decode"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "decode", "decode-old.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("old tombstone still on disk: %v", err)
	}
}
