package kvbm_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchyard.dev/libs/kvbm"
	"switchyard.dev/libs/kvbm/tiertest"
)

const diskBlock = 8192

func openDisk(t *testing.T, dir string, rec *tiertest.Recorder) *kvbm.Disk {
	t.Helper()
	cfg := kvbm.DiskConfig{Dir: dir, Blocks: 8, BlockBytes: diskBlock, MaxTokens: 16}
	if rec != nil {
		cfg.OnChange = rec.OnChange
	}
	d, err := kvbm.OpenDisk(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func slab(t *testing.T, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "kvbm-slab-*.kv"))
	if err != nil || len(m) != 1 {
		t.Fatalf("slab files in %s: %v %v", dir, m, err)
	}
	return m[0]
}

// A reopened tier re-advertises every block it wrote, with its meta, and
// serves the same bytes.
func TestDiskRestartReadvertises(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := openDisk(t, dir, nil)
	for i := range 5 {
		if _, err := d.Put(t.Context(), tiertest.Meta(i), tiertest.Data(i, diskBlock)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	rec := tiertest.NewRecorder()
	d = openDisk(t, dir, rec)
	rec.Check(t, d)
	if s := d.Stats(); s.Blocks != 5 {
		t.Fatalf("%d blocks after reopening; want 5", s.Blocks)
	}
	dst := make([]byte, diskBlock)
	for i := range 5 {
		m, err := d.Get(t.Context(), tiertest.Meta(i).Hash, dst)
		if err != nil || !bytes.Equal(dst, tiertest.Data(i, diskBlock)) || m.Parent != tiertest.Meta(i).Parent || len(m.Tokens) != 2 {
			t.Fatalf("block %d after reopening: %+v, %v", i, m, err)
		}
	}
	// A new block after the restart goes to a free slot, not over one.
	if _, err := d.Put(t.Context(), tiertest.Meta(9), tiertest.Data(9, diskBlock)); err != nil {
		t.Fatal(err)
	}
	if d.Prefix([]uint64{tiertest.Meta(0).Hash}) != 1 {
		t.Fatal("a Put after a restart overwrote a recovered block")
	}
}

// A block whose data rotted on disk is advertised (its header is intact),
// but its first read fails its checksum: it is dropped, withdrawn and
// counted, and never served. A block with a torn header is not advertised.
func TestDiskCorruption(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := openDisk(t, dir, nil)
	for i := range 2 {
		if _, err := d.Put(t.Context(), tiertest.Meta(i), tiertest.Data(i, diskBlock)); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(slab(t, dir), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Slots are 4 KiB of header and 8 KiB of data: rot slot 0's data and
	// tear slot 1's header.
	const slot = 4096 + diskBlock
	if _, err := f.WriteAt([]byte{0xff}, 4096+100); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xff}, slot+9); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	rec := tiertest.NewRecorder()
	d = openDisk(t, dir, rec)
	if got := d.Prefix([]uint64{tiertest.Meta(1).Hash}); got != 0 {
		t.Error("a block with a torn header was advertised")
	}
	_, err = d.Get(t.Context(), tiertest.Meta(0).Hash, make([]byte, diskBlock))
	if !errors.Is(err, kvbm.ErrCorrupt) {
		t.Fatalf("Get of a rotted block: %v; want ErrCorrupt", err)
	}
	if d.Prefix([]uint64{tiertest.Meta(0).Hash}) != 0 || d.Stats().Corrupt != 1 {
		t.Errorf("after the failed check: still held %v, corrupt count %d; want dropped and counted", d.Prefix([]uint64{tiertest.Meta(0).Hash}) == 1, d.Stats().Corrupt)
	}
	rec.Check(t, d) // the drop was announced
}

// Another geometry is another slab: nothing is misread.
func TestDiskGeometryChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := openDisk(t, dir, nil)
	if _, err := d.Put(t.Context(), tiertest.Meta(0), tiertest.Data(0, diskBlock)); err != nil {
		t.Fatal(err)
	}
	_ = d.Close()
	other, err := kvbm.OpenDisk(kvbm.DiskConfig{Dir: dir, Blocks: 8, BlockBytes: diskBlock * 2, MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	if n := other.Stats().Blocks; n != 0 {
		t.Fatalf("a tier of another block size found %d blocks", n)
	}
}

// A disk without room for the slab fails at open, naming the directory.
func TestDiskNoRoom(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := kvbm.OpenDisk(kvbm.DiskConfig{Dir: dir, Blocks: 1 << 40 / 12288, BlockBytes: diskBlock, MaxTokens: 16})
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Fatalf("OpenDisk of a slab larger than the disk: %v; want an error naming %s", err, dir)
	}
}

func TestDiskBadConfig(t *testing.T) {
	t.Parallel()
	for _, cfg := range []kvbm.DiskConfig{
		{Blocks: 1, BlockBytes: 1},
		{Dir: t.TempDir(), Blocks: 0, BlockBytes: 1},
		{Dir: t.TempDir(), Blocks: 1, BlockBytes: 1, MaxTokens: kvbm.MaxHeaderTokens + 1},
	} {
		if d, err := kvbm.OpenDisk(cfg); err == nil {
			_ = d.Close()
			t.Errorf("OpenDisk(%+v) succeeded", cfg)
		}
	}
}

// Two tiers never share a slab.
func TestDiskLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	openDisk(t, dir, nil)
	if d, err := kvbm.OpenDisk(kvbm.DiskConfig{Dir: dir, Blocks: 8, BlockBytes: diskBlock, MaxTokens: 16}); err == nil {
		_ = d.Close()
		t.Fatal("a second tier opened a slab in use")
	} else if !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open: %v; want an error saying the slab is in use", err)
	}
}
