// Package release builds the release artifacts of Switchyard's services:
// per service, a static linux binary stamped with the service's own
// version, a reproducible .tar.gz of it with its CHANGELOG.md, and an OCI
// image of it, and a SHA256SUMS over all of them. Deployments (the Nomad
// jobs) name an archive by version and checksum; a registry takes the
// image (`crane push`, `podman load`, `docker load`).
//
// Each service is versioned on its own (services/<svc>/VERSION), so a
// release is a set of per-service versions, not one number. The images
// are built without a container daemon (go-containerregistry): one layer
// holding the binary at /usr/local/bin/<svc>, on no base image (the
// binaries are static, CGO off: the UCX transfer backend, which needs
// cgo, is not in them; a UCX build is made on the target's own toolchain),
// run as an unprivileged user.
//
// Everything is reproducible from the commit: archive entries and image
// layers carry the commit's time, not the build's, and no build paths
// (-trimpath), so two builds of one commit give the same checksums.
package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Services are the services released, in the order they are built.
var Services = []string{"frontend", "router", "prefill", "decode", "kvbm-controller", "planner"}

// ImageRepo prefixes image names: ImageRepo/<svc>:<version>.
const ImageRepo = "switchyard"

// Options configures Build.
type Options struct {
	Root string // repository root
	Out  string // output directory
	Arch string // GOARCH; the OS is linux
	// Services to build; empty means all of Services.
	Services []string
}

// Artifact is one file written, with its SHA-256 in hex.
type Artifact struct {
	Path   string
	SHA256 string
}

// Build builds the artifacts of o.Services into o.Out and writes
// SHA256SUMS there. It checks every service (its VERSION, its CHANGELOG)
// before building any.
func Build(ctx context.Context, o Options) ([]Artifact, error) {
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	svcs := o.Services
	if len(svcs) == 0 {
		svcs = Services
	}
	versions := map[string]string{}
	for _, svc := range svcs {
		if !slices.Contains(Services, svc) {
			return nil, fmt.Errorf("service %q: want one of %s", svc, strings.Join(Services, ", "))
		}
		v, err := ServiceVersion(o.Root, svc)
		if err != nil {
			return nil, err
		}
		if err := checkChangelog(o.Root, svc, v); err != nil {
			return nil, err
		}
		versions[svc] = v
	}
	commit, when, err := headCommit(ctx, o.Root)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	var arts []Artifact
	for _, svc := range svcs {
		a, err := buildService(ctx, o, svc, versions[svc], commit, when)
		arts = append(arts, a...)
		if err != nil {
			return arts, err
		}
	}
	sums, err := writeSums(o.Out, arts)
	if err != nil {
		return arts, err
	}
	return append(arts, sums), nil
}

var versionRE = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

// ServiceVersion reads services/<svc>/VERSION: a semantic version.
func ServiceVersion(root, svc string) (string, error) {
	p := filepath.Join(root, "services", svc, "VERSION")
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if !versionRE.MatchString(v) {
		return "", fmt.Errorf("%s: %q is not a version (MAJOR.MINOR.PATCH)", p, v)
	}
	return v, nil
}

// checkChangelog requires services/<svc>/CHANGELOG.md to have a section
// for version: a line "## <version>" (optionally "## [<version>]",
// followed by a date).
func checkChangelog(root, svc, version string) error {
	p := filepath.Join(root, "services", svc, "CHANGELOG.md")
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	re := regexp.MustCompile(`(?m)^## \[?` + regexp.QuoteMeta(version) + `\]?(\s|$)`)
	if !re.Match(b) {
		return fmt.Errorf("%s: no section \"## %s\" for the VERSION being released", p, version)
	}
	return nil
}

// headCommit is HEAD's short hash and commit time.
func headCommit(ctx context.Context, root string) (string, time.Time, error) {
	out, err := exec.CommandContext(ctx, "git", "-C", root, "log", "-1", "--format=%h %ct").Output()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("git log in %s: %w", root, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return "", time.Time{}, fmt.Errorf("git log in %s: %q", root, out)
	}
	sec, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return "", time.Time{}, err
	}
	return f[0], time.Unix(sec, 0).UTC(), nil
}

func buildService(ctx context.Context, o Options, svc, version, commit string, when time.Time) ([]Artifact, error) {
	tmp, err := os.MkdirTemp("", "switchyard-release-"+svc)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, svc)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", fmt.Sprintf("-s -w -X switchyard.dev/services/%s.Version=%s", svc, version),
		"-o", bin, "./services/"+svc+"/cmd/"+svc)
	cmd.Dir = o.Root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building %s: %w\n%s", svc, err, out)
	}
	binData, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	changelog, err := os.ReadFile(filepath.Join(o.Root, "services", svc, "CHANGELOG.md"))
	if err != nil {
		return nil, err
	}
	base := fmt.Sprintf("%s-%s-linux-%s", svc, version, o.Arch)

	var arts []Artifact
	archive, err := archiveOf(base, svc, binData, changelog, when)
	if err != nil {
		return nil, err
	}
	a, err := write(filepath.Join(o.Out, base+".tar.gz"), archive)
	if err != nil {
		return nil, err
	}
	arts = append(arts, a)

	img, err := Image(svc, version, commit, o.Arch, binData, when)
	if err != nil {
		return arts, err
	}
	tag, err := name.NewTag(fmt.Sprintf("%s/%s:%s", ImageRepo, svc, version))
	if err != nil {
		return arts, err
	}
	imgPath := filepath.Join(o.Out, base+".image.tar")
	if err := tarball.WriteToFile(imgPath, tag, img); err != nil {
		return arts, fmt.Errorf("writing the %s image: %w", svc, err)
	}
	sum, err := fileSum(imgPath)
	if err != nil {
		return arts, err
	}
	return append(arts, Artifact{Path: imgPath, SHA256: sum}), nil
}

// archiveOf is a reproducible .tar.gz of base/<svc> and base/CHANGELOG.md.
func archiveOf(base, svc string, bin, changelog []byte, when time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{base + "/" + svc, 0o755, bin}, {base + "/CHANGELOG.md", 0o644, changelog}} {
		if err := addFile(tw, f.name, f.mode, f.data, when); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func addFile(tw *tar.Writer, name string, mode int64, data []byte, when time.Time) error {
	hdr := &tar.Header{Name: name, Mode: mode, Size: int64(len(data)), ModTime: when, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// Image is the OCI image of a service's binary: one layer with it at
// /usr/local/bin/<svc>, its entrypoint, an unprivileged user, and OCI
// labels naming the version and the commit.
func Image(svc, version, commit, arch string, bin []byte, when time.Time) (v1.Image, error) {
	var layerTar bytes.Buffer
	tw := tar.NewWriter(&layerTar)
	for _, d := range []string{"usr/", "usr/local/", "usr/local/bin/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Mode: 0o755, Typeflag: tar.TypeDir, ModTime: when, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	if err := addFile(tw, "usr/local/bin/"+svc, 0o755, bin, when); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := layerTar.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: when}
	cf.Config.Entrypoint = []string{"/usr/local/bin/" + svc}
	cf.Config.User = "65532:65532"
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    "switchyard-" + svc,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": commit,
		"org.opencontainers.image.created":  when.Format(time.RFC3339),
	}
	return mutate.ConfigFile(img, cf)
}

func write(path string, data []byte) (Artifact, error) {
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return Artifact{}, err
	}
	s := sha256.Sum256(data)
	return Artifact{Path: path, SHA256: hex.EncodeToString(s[:])}, nil
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// writeSums writes SHA256SUMS (sha256sum's format) for arts, keeping the
// lines of other files already listed there, so releasing some services
// adds to the sums of a previous run.
func writeSums(out string, arts []Artifact) (Artifact, error) {
	path := filepath.Join(out, "SHA256SUMS")
	lines := map[string]string{}
	if b, err := os.ReadFile(path); err == nil {
		for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
			if sum, file, ok := strings.Cut(l, "  "); ok {
				lines[file] = sum
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return Artifact{}, err
	}
	for _, a := range arts {
		lines[filepath.Base(a.Path)] = a.SHA256
	}
	var b strings.Builder
	for _, f := range slices.Sorted(maps.Keys(lines)) {
		fmt.Fprintf(&b, "%s  %s\n", lines[f], f)
	}
	return write(path, []byte(b.String()))
}
