package kvbm_test

import (
	"bytes"
	"testing"

	"switchyard.dev/libs/kvbm/tiertest"
)

// Writes that start failing after the tier opened (the slab's disk gone
// read-only or bad) cost only their blocks: each failed Put returns its
// error, frees its slot and is counted; the blocks already written are
// still served; and once writes succeed again the tier takes blocks into
// every slot, none leaked by the failures.
func TestDiskWritesFailAfterOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rec := tiertest.NewRecorder()
	d := openDisk(t, dir, rec) // 8 slots
	for i := range 3 {
		if _, err := d.Put(t.Context(), tiertest.Meta(i), tiertest.Data(i, diskBlock)); err != nil {
			t.Fatal(err)
		}
	}
	restore := tiertest.RefuseWrites(t, slab(t, dir))
	for i := 10; i < 30; i++ { // more than the slots: a leaked slot would end in ErrFull
		if ok, err := d.Put(t.Context(), tiertest.Meta(i), tiertest.Data(i, diskBlock)); err == nil || ok {
			t.Fatalf("Put to a slab that refuses writes: %v, %v; want an error", ok, err)
		}
	}
	st := d.Stats()
	if st.WriteErrors != 20 || st.Puts != 3 || st.Blocks != 3 || d.Prefix([]uint64{tiertest.Meta(10).Hash}) != 0 {
		t.Fatalf("after 20 failed writes: %+v; want them counted, nothing advertised", st)
	}
	dst := make([]byte, diskBlock)
	for i := range 3 {
		if _, err := d.Get(t.Context(), tiertest.Meta(i).Hash, dst); err != nil || !bytes.Equal(dst, tiertest.Data(i, diskBlock)) {
			t.Fatalf("Get of block %d written before the failures: %v", i, err)
		}
	}
	rec.Check(t, d)

	restore()
	for i := 40; i < 48; i++ { // every slot: the old blocks are evicted in turn
		if ok, err := d.Put(t.Context(), tiertest.Meta(i), tiertest.Data(i, diskBlock)); err != nil || !ok {
			t.Fatalf("Put once writes work again: %v, %v", ok, err)
		}
	}
	if st := d.Stats(); st.Blocks != 8 || st.WriteErrors != 20 || st.ReadErrors != 0 {
		t.Fatalf("after writes came back: %+v; want all 8 slots holding blocks", st)
	}
	if _, err := d.Get(t.Context(), tiertest.Meta(47).Hash, dst); err != nil || !bytes.Equal(dst, tiertest.Data(47, diskBlock)) {
		t.Fatalf("Get of a block written after the failures: %v", err)
	}
	rec.Check(t, d)
}
