package sharedtest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFound(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b", "c")
	if err := os.MkdirAll(filepath.Join(root, "shared", "models", "m"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "shared", "models", "m", "w.bin"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(deep)
	t.Setenv(RequireEnv, "1")
	want := filepath.Join(root, "shared", "models", "m", "w.bin")
	if got := Path(t, "models/m/w.bin"); got != want {
		t.Errorf("Path = %q; want the file in the ancestor, %q", got, want)
	}
	if got, ok := Optional(t, "models/m/w.bin"); !ok || got != want {
		t.Errorf("Optional = %q, %v; want %q, true", got, ok, want)
	}
}

// recorder captures how Path ends a test without ending this one.
type recorder struct {
	testing.TB
	failed, skipped bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Skipf(string, ...any)  { r.skipped = true }

func TestPathMissing(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, tt := range []struct {
		env        string
		fail, skip bool
	}{
		{"1", true, false},
		{"", false, true},
		{"0", false, true},
	} {
		t.Setenv(RequireEnv, tt.env)
		r := &recorder{TB: t}
		Path(r, "models/absent")
		if r.failed != tt.fail || r.skipped != tt.skip {
			t.Errorf("Path with %s=%q: failed=%v skipped=%v; want failed=%v skipped=%v", RequireEnv, tt.env, r.failed, r.skipped, tt.fail, tt.skip)
		}
		r = &recorder{TB: t}
		if _, ok := Optional(r, "models/absent"); ok || r.failed != tt.fail || r.skipped {
			t.Errorf("Optional with %s=%q: ok=%v failed=%v skipped=%v; want failed=%v, no skip", RequireEnv, tt.env, ok, r.failed, r.skipped, tt.fail)
		}
	}
}

// The repository's own shared/ is found from here, as every test finds it.
func TestRepositoryShared(t *testing.T) {
	t.Parallel()
	p := Path(t, Stories260K)
	if _, err := os.Stat(filepath.Join(p, "stories260K.bin")); err != nil {
		t.Fatal(err)
	}
}
