package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRunTwice(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for range 2 {
		if code := run([]string{"-dir", dir, "-names", "router, decode"}); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}
	for _, f := range []string{"ca.crt", "ca.key", "router.crt", "router.key", "decode.crt", "decode.key"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	if code := run([]string{"-no-such-flag"}); code != 2 {
		t.Errorf("bad flag: exit %d, want 2", code)
	}
}
