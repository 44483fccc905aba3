package leader

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/deptest"
)

func testExclusive(t *testing.T, a, b Lock) {
	t.Helper()
	ctx := context.Background()
	if _, held, err := a.TryAcquire(ctx); err != nil || !held {
		t.Fatalf("first: held %v, %v", held, err)
	}
	if _, held, err := b.TryAcquire(ctx); err != nil || held {
		t.Fatalf("second while the first holds it: held %v, %v", held, err)
	}
	if _, held, _ := a.TryAcquire(ctx); !held {
		t.Fatal("the holder asking again must still hold it")
	}
	if err := a.Release(); err != nil {
		t.Fatal(err)
	}
	deptest.Eventually(t, 10*time.Second, "the second takes the released lock", func() bool {
		_, held, err := b.TryAcquire(ctx)
		return err == nil && held
	})
	_ = b.Release()
}

// One holder at a time; released, the next takes it.
func TestFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "planner.lock")
	testExclusive(t, NewFile(path), NewFile(path))
}

func TestConsul(t *testing.T) {
	t.Parallel()
	c := deptest.StartConsul(t)
	a, err := NewConsul(c.Addr, "", "switchyard/planner/leader", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewConsul(c.Addr, "", "switchyard/planner/leader", 10*time.Second)
	testExclusive(t, a, b)
}
