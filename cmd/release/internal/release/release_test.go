package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const repoRoot = "../../../.."

// A service's release is an archive with its stamped binary and
// changelog, an image of the same binary, and SHA256SUMS naming both;
// building the same commit again gives the same bytes.
func TestBuildService(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a service; skipped under -short")
	}
	const svc = "kvbm-controller"
	version, err := ServiceVersion(repoRoot, svc)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	arts, err := Build(t.Context(), Options{Root: repoRoot, Out: out, Arch: runtime.GOARCH, Services: []string{svc}})
	if err != nil {
		t.Fatal(err)
	}
	base := svc + "-" + version + "-linux-" + runtime.GOARCH
	want := []string{base + ".tar.gz", base + ".image.tar", "SHA256SUMS"}
	if len(arts) != len(want) {
		t.Fatalf("artifacts %v; want %v", arts, want)
	}
	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range arts {
		if filepath.Base(a.Path) != want[i] {
			t.Errorf("artifact %d is %s; want %s", i, a.Path, want[i])
		}
		got, err := fileSum(a.Path)
		if err != nil || got != a.SHA256 {
			t.Errorf("%s: sum %s, reported %s (%v)", a.Path, got, a.SHA256, err)
		}
		if i < 2 && !strings.Contains(string(sums), a.SHA256+"  "+want[i]+"\n") {
			t.Errorf("SHA256SUMS lacks %s:\n%s", want[i], sums)
		}
	}

	files := untar(t, arts[0].Path)
	bin, changelog := files[base+"/"+svc], files[base+"/CHANGELOG.md"]
	if len(bin) == 0 || !strings.Contains(string(changelog), "## "+version) {
		t.Fatalf("archive holds %d binary bytes and changelog %q", len(bin), changelog)
	}
	exe := filepath.Join(t.TempDir(), svc)
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := exec.Command(exe, "-version").CombinedOutput(); err != nil || !strings.Contains(string(got), version) {
		t.Errorf("%s -version: %q, %v; want %s", svc, got, err, version)
	}

	tag, err := name.NewTag(ImageRepo + "/" + svc + ":" + version)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(arts[1].Path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if ep := cf.Config.Entrypoint; len(ep) != 1 || ep[0] != "/usr/local/bin/"+svc || cf.Config.Labels["org.opencontainers.image.version"] != version || cf.Config.User == "" || cf.OS != "linux" {
		t.Errorf("image config %+v", cf.Config)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %d, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if inImage := readTar(t, rc)["usr/local/bin/"+svc]; !bytes.Equal(inImage, bin) {
		t.Errorf("the image's binary (%d bytes) differs from the archive's (%d)", len(inImage), len(bin))
	}

	again, err := Build(context.Background(), Options{Root: repoRoot, Out: t.TempDir(), Arch: runtime.GOARCH, Services: []string{svc}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range arts {
		if again[i].SHA256 != arts[i].SHA256 {
			t.Errorf("%s: a second build gives %s, the first %s: not reproducible", want[i], again[i].SHA256, arts[i].SHA256)
		}
	}
}

// Nothing is built for a service whose version or changelog is wrong.
func TestBuildRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, version, changelog, want string
	}{
		{"no section", "1.2.3", "# c\n\n## 1.2.2 — 2026-01-01\n", `no section "## 1.2.3"`},
		{"a longer version only", "1.2.3", "## 1.2.30\n", `no section "## 1.2.3"`},
		{"bad version", "v1", "## v1\n", "is not a version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			dir := filepath.Join(root, "services", "router")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte(tc.version+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "CHANGELOG.md"), []byte(tc.changelog), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(root, "dist")
			_, err := Build(t.Context(), Options{Root: root, Out: out, Services: []string{"router"}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v; want %q", err, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("the output directory was made for a refused release")
			}
		})
	}
	if _, err := Build(t.Context(), Options{Root: t.TempDir(), Services: []string{"nosuch"}}); err == nil || !strings.Contains(err.Error(), "want one of") {
		t.Errorf("an unknown service: err = %v", err)
	}
}

// Every released service's changelog has a section for its version.
func TestChangelogsCurrent(t *testing.T) {
	t.Parallel()
	for _, svc := range Services {
		v, err := ServiceVersion(repoRoot, svc)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkChangelog(repoRoot, svc, v); err != nil {
			t.Error(err)
		}
	}
}

func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	return readTar(t, zr)
}

func readTar(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
	}
}
