package nixl

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A deregistration that gives up while an access is in flight leaves the
// region refusing new accesses; a second call waits for the access to end
// and removes it.
func TestRemoveAfterTimeoutWaits(t *testing.T) {
	t.Parallel()
	tab := newRegionTable()
	id := tab.add(make([]byte, 64))
	_, release, err := tab.Acquire(id, 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if _, err := tab.remove(ctx, id); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("remove with an access in flight: %v, want a deadline error", err)
	}
	if _, _, err := tab.Acquire(id, 0, 8); !errors.Is(err, ErrUnknownRegion) {
		t.Fatalf("access after a remove gave up: %v, want ErrUnknownRegion", err)
	}
	done := make(chan error, 1)
	go func() {
		removed, err := tab.remove(context.Background(), id)
		if err == nil && !removed {
			err = errors.New("not removed")
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("second remove returned (%v) while the access is in flight", err)
	case <-time.After(20 * time.Millisecond):
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := tab.remove(context.Background(), id); !errors.Is(err, ErrUnknownRegion) {
		t.Fatalf("remove of a removed region: %v, want ErrUnknownRegion", err)
	}
}

// Regions takes its owner's ids, refuses one in use, and serves and
// removes them as the agent's table does.
func TestRegionsUnderChosenIDs(t *testing.T) {
	t.Parallel()
	r := NewRegions()
	if err := r.Add(7, make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(7, make([]byte, 64)); err == nil {
		t.Fatal("a second region 7 was taken")
	}
	if _, _, err := r.Acquire(7, 60, 8); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("past the end: %v, want ErrOutOfRange", err)
	}
	_, release, err := r.Acquire(7, 0, 8)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := r.Remove(ctx, 7); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("remove with an access in flight: %v, want a deadline error", err)
	}
	release()
	if err := r.Remove(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Acquire(7, 0, 8); !errors.Is(err, ErrUnknownRegion) {
		t.Fatalf("after removal: %v, want ErrUnknownRegion", err)
	}
}
