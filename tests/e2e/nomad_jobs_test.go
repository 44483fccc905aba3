package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/tlsconf/certgen"
)

// nomadJob is the one job file every service is deployed with.
const nomadJob = "../../deploy/nomad/switchyard.nomad.hcl"

// The release as operators ship it: make release's archives, served over
// HTTP, each service deployed with deploy/nomad/switchyard.nomad.hcl by
// scripts/nomad-deploy.sh (version and checksum from SHA256SUMS) into a
// real Nomad and Consul, with mutual TLS between the services
// (certificates from a Nomad Variable, Consul's checks on the plain
// health port); a chat completion through the frontend, with an API key
// from a Nomad Variable. Bad inputs are refused before anything is
// submitted. Then the router rolls to a new version through a canary
// and `nomad deployment promote` while requests keep flowing, and none
// fails.
func TestNomadJobsDeployRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the release and runs it under Nomad; skipped under -short")
	}
	nomadBin := deptest.Binary(t, "nomad", "NOMAD_BIN")
	model, tok := StoriesModel(t)
	dist := release(t)
	consul := deptest.StartConsul(t)
	nomad := deptest.StartNomad(t, consul.Addr)
	srv := httptest.NewServer(http.FileServer(http.Dir(dist)))
	t.Cleanup(srv.Close)
	d := &deployer{t: t, nomad: nomad, bin: nomadBin, base: srv.URL, sums: filepath.Join(dist, "SHA256SUMS"),
		vars: []string{"-var", "consul_addr=" + consul.Addr, "-var", "count=1", "-var", "cpu=100", "-var", "memory=256",
			"-var", "min_healthy_time=2s", "-var", "model=" + model, "-var", "tokenizer=" + tok}}

	t.Run("refused", d.refused)
	if t.Failed() {
		return
	}

	ca := putMeshCerts(t, nomad)
	const key, fallbackKey = "sk-e2e-nomad", "sk-e2e-fallback"
	if err := nomad.Do(t.Context(), http.MethodPut, "/v1/var/nomad/jobs/switchyard-frontend",
		map[string]any{"Items": map[string]string{"api_keys": key + " name=e2e"}}, nil); err != nil {
		t.Fatal(err)
	}
	d.frontendVars = []string{"-var", "api_keys=" + fallbackKey + " name=fallback"}
	for _, svc := range Services {
		if out, err := d.deploy(svc, nil); err != nil {
			t.Fatalf("deploy %s: %v\n%s", svc, err, out)
		}
	}
	for _, svc := range Services {
		waitDeployment(t, nomad, svc)
	}
	cc, err := api.NewClient(&api.Config{Address: consul.Addr})
	if err != nil {
		t.Fatal(err)
	}
	checkTLSRecords(t, cc)
	// The OpenAI API serves the mesh certificate (no tls_public_cert in
	// the Variables) and asks its callers for none.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca}}}
	c := openai.NewClient(option.WithBaseURL("https://"+passing(t, cc, "switchyard-frontend")+"/v1/"),
		option.WithAPIKey(key), option.WithMaxRetries(0), option.WithHTTPClient(hc))
	id := waitModel(t, c)
	res, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
		Model:     id,
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")},
		MaxTokens: openai.Int(16), Temperature: openai.Float(0),
	})
	if err != nil {
		t.Fatalf("chat completion through the Nomad-deployed frontend: %v", err)
	}
	if len(res.Choices) != 1 || res.Choices[0].Message.Content == "" || res.Usage.CompletionTokens == 0 {
		t.Fatalf("chat completion: %+v", res)
	}
	t.Logf("chat completion (%s): %q", id, res.Choices[0].Message.Content)

	// Each service in turn rolls to a new version through a canary, while
	// a client that finds a frontend in Consul, as one behind a load
	// balancer would, keeps sending requests.
	lb := func() openai.Client {
		addr := "127.0.0.1:1" // none passing: the request fails, and counts
		if entries, _, err := cc.Health().Service("switchyard-frontend", "", true, nil); err == nil && len(entries) > 0 {
			e := entries[rand.IntN(len(entries))].Service
			addr = fmt.Sprintf("%s:%d", e.Address, e.Port)
		}
		return openai.NewClient(option.WithBaseURL("https://"+addr+"/v1/"),
			option.WithAPIKey(key), option.WithMaxRetries(0), option.WithHTTPClient(hc))
	}
	for _, svc := range Services {
		t.Run("canary "+svc, func(t *testing.T) { d.canary(t, cc, lb, id, dist, svc) })
	}
	t.Run("keys", func(t *testing.T) { rotateKeys(t, nomad, hc, passing(t, cc, "switchyard-frontend"), key, fallbackKey) })
}

// putMeshCerts stores a new mesh CA and a certificate for 127.0.0.1 (the
// dev agent's address, which the services advertise) in the Nomad
// Variable nomad/jobs, where every job's templates find them, and
// returns the CA to trust.
func putMeshCerts(t *testing.T, n *deptest.Nomad) *x509.CertPool {
	t.Helper()
	ca, err := certgen.NewCA("switchyard e2e nomad CA")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Sign("mesh", certgen.LocalHosts)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Do(t.Context(), http.MethodPut, "/v1/var/nomad/jobs", map[string]any{"Items": map[string]string{
		"tls_ca": string(ca.PEM), "tls_cert": string(leaf.CertPEM), "tls_key": string(leaf.KeyPEM)}}, nil); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	return roots
}

// checkTLSRecords: every process registered itself as serving TLS
// (discovery.MetaTLS), so its peers dial it over https.
func checkTLSRecords(t *testing.T, cc *api.Client) {
	t.Helper()
	for _, svc := range Services {
		entries, _, err := cc.Health().Service("switchyard-"+svc, "", true, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) == 0 {
			t.Errorf("switchyard-%s: no passing record in Consul", svc)
		}
		for _, e := range entries {
			if got := e.Service.Meta[discovery.MetaTLS]; got != "1" {
				t.Errorf("switchyard-%s record %s: meta %s=%q, want \"1\" (mutual TLS)", svc, e.Service.ID, discovery.MetaTLS, got)
			}
		}
	}
}

// rotateKeys: the Nomad Variable's key is accepted and the job
// variable's fallback refused while the Variable exists; once it is
// deleted, the template renders the fallback and the frontend, which
// re-reads its keys file, accepts the fallback key instead, without a
// restart.
func rotateKeys(t *testing.T, n *deptest.Nomad, hc *http.Client, frontend, key, fallback string) {
	status := func(k string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+frontend+"/v1/models", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+k)
		res, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got, want := []int{status(key), status(fallback)}, []int{200, 401}; got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("the Variable's key, the fallback key: %v, want %v", got, want)
	}
	if err := n.Do(t.Context(), http.MethodDelete, "/v1/var/nomad/jobs/switchyard-frontend", nil, nil); err != nil {
		t.Fatal(err)
	}
	deptest.Eventually(t, time.Minute, "the fallback key accepted once the Variable is gone", func() bool {
		time.Sleep(100 * time.Millisecond)
		return status(fallback) == http.StatusOK
	})
	if got := status(key); got != http.StatusUnauthorized {
		t.Errorf("the deleted Variable's key: %d, want 401", got)
	}
}

// deployer runs scripts/nomad-deploy.sh against one Nomad.
type deployer struct {
	t     *testing.T
	nomad *deptest.Nomad
	bin   string // nomad CLI
	base  string // artifact base URL
	sums  string // SHA256SUMS path
	vars  []string
	// frontendVars are the frontend's own variables, on every deploy of it.
	frontendVars []string
}

// deploy deploys svc's release with the deployer's variables; env (e.g.
// VERSION=..., CHECKSUM=...) overrides what SHA256SUMS says.
func (d *deployer) deploy(svc string, env []string, extra ...string) (string, error) {
	if svc == "frontend" {
		extra = append(slices.Clone(d.frontendVars), extra...)
	}
	args := append([]string{"../../scripts/nomad-deploy.sh", svc, d.base, d.sums, "-detach"}, d.vars...)
	return d.run("bash", append(args, extra...), env)
}

func (d *deployer) run(name string, args, env []string) (string, error) {
	cmd := exec.CommandContext(d.t.Context(), name, args...)
	cmd.Env = append(os.Environ(), append([]string{"NOMAD_ADDR=" + d.nomad.Addr, "NOMAD_BIN=" + d.bin}, env...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// refused: each bad input fails with a message naming it, and Nomad then
// has no job at all.
func (d *deployer) refused(t *testing.T) {
	good := "-var checksum=" + strings.Repeat("0", 64)
	for _, tc := range []struct {
		name string
		run  func() (string, error)
		want string
	}{
		{"missing version", func() (string, error) {
			return d.run(d.bin, append([]string{"job", "run", "-detach", "-var", "service=router",
				"-var", "artifact_base=" + d.base}, append(strings.Fields(good), nomadJob)...), nil)
		}, `Unset variable "version"`},
		{"malformed checksum", func() (string, error) {
			return d.deploy("router", []string{"CHECKSUM=sha256:abc"})
		}, "The checksum must be the archive's SHA-256"},
		{"artifact does not answer", func() (string, error) {
			return d.deploy("router", []string{"VERSION=9.9.9"})
		}, "router-9.9.9-linux-amd64.tar.gz does not answer"},
		{"artifact base not http", func() (string, error) {
			d := *d
			d.base = "file:///srv/switchyard"
			return d.deploy("router", nil)
		}, "must be an http:// or https:// URL"},
		{"unknown service", func() (string, error) {
			return d.deploy("gateway", []string{"VERSION=0.1.0", "CHECKSUM=" + strings.Repeat("0", 64)})
		}, "The service must be one of"},
		// No certificates stored yet: TLS (the default) cannot work.
		{"tls without certificates", func() (string, error) {
			return d.deploy("router", nil)
		}, "TLS is on but the Nomad Variables nomad/jobs/switchyard-router and nomad/jobs have no tls_ca tls_cert tls_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.run()
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("err %v, want a failure saying %q; output:\n%s", err, tc.want, out)
			}
			var jobs []struct{ ID string }
			if err := d.nomad.Do(t.Context(), http.MethodGet, "/v1/jobs", nil, &jobs); err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 0 {
				t.Errorf("jobs registered after a refused deploy: %+v", jobs)
			}
		})
	}
}

// canary rolls svc to a new version (the same binary in an archive of
// another version: what Nomad sees is a new job version) under a trickle
// of chat completions: one canary placed beside the running instance and
// tagged "canary" in Nomad's record, the deployment held until promoted,
// then the old instance stopped; no request fails.
func (d *deployer) canary(t *testing.T, cc *api.Client, client func() openai.Client, model, dist, svc string) {
	version, sum := repackRelease(t, dist, svc, "0.99.0-canary")
	stop := trickle(t, client, model)
	defer stop()
	if out, err := d.deploy(svc, []string{"VERSION=" + version, "CHECKSUM=" + sum}); err != nil {
		t.Fatalf("deploy %s %s: %v\n%s", svc, version, err, out)
	}
	var dep deployment
	deptest.Eventually(t, 2*time.Minute, "a healthy "+svc+" canary awaiting promotion", func() bool {
		dep = latestDeployment(t, d.nomad, svc)
		g := dep.TaskGroups[svc]
		return dep.JobVersion > 0 && len(g.PlacedCanaries) == 1 && g.HealthyAllocs >= 1 && !g.Promoted
	})
	if dep.Status != "running" {
		t.Fatalf("deployment %s is %s before promotion, want running (auto_promote off)", dep.ID, dep.Status)
	}
	deptest.Eventually(t, 30*time.Second, "the canary tag on Nomad's record of the canary", func() bool {
		entries, _, err := cc.Health().Service("switchyard-"+svc+"-nomad", "canary", true, nil)
		return err == nil && len(entries) == 1
	})
	if out, err := d.run(d.bin, []string{"deployment", "promote", dep.ID}, nil); err != nil {
		t.Fatalf("nomad deployment promote: %v\n%s", err, out)
	}
	waitDeployment(t, d.nomad, svc)
	deptest.Eventually(t, time.Minute, "one "+svc+" instance left in Consul", func() bool {
		entries, _, err := cc.Health().Service("switchyard-"+svc, "", true, nil)
		return err == nil && len(entries) == 1
	})
	time.Sleep(2 * time.Second) // a few requests through the promoted router alone
	n, failed := stop()
	if n < 10 {
		t.Errorf("only %d requests during the rollout: the trickle did not run", n)
	}
	if len(failed) > 0 {
		t.Errorf("%d of %d requests failed during the canary rollout: %v", len(failed), n, failed)
	}
	t.Logf("%d requests during the %s rollout, %d failed", n, svc, len(failed))
}

// trickle sends one short chat completion after another, each through
// the client new returns then, until stop is called; stop returns how
// many were sent and the errors of those that failed.
func trickle(t *testing.T, newClient func() openai.Client, model string) (stop func() (int64, []string)) {
	var requests atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			requests.Add(1)
			c := newClient()
			_, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{
				Model:     model,
				Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Once upon a time")},
				MaxTokens: openai.Int(8),
			})
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	var once sync.Once
	return func() (int64, []string) {
		once.Do(func() { close(done); wg.Wait() })
		mu.Lock()
		defer mu.Unlock()
		return requests.Load(), errs
	}
}

// deployment is the part of Nomad's deployment object the tests read.
type deployment struct {
	ID, Status string
	JobVersion int
	TaskGroups map[string]struct {
		PlacedCanaries []string
		HealthyAllocs  int
		Promoted       bool
	}
}

func latestDeployment(t *testing.T, n *deptest.Nomad, svc string) deployment {
	t.Helper()
	var d deployment
	if err := n.Do(t.Context(), http.MethodGet, "/v1/job/switchyard-"+svc+"/deployment", nil, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

// waitDeployment waits until svc's latest deployment succeeded: every
// allocation healthy by its checks.
func waitDeployment(t *testing.T, n *deptest.Nomad, svc string) {
	t.Helper()
	var d deployment
	deptest.Eventually(t, 3*time.Minute, "switchyard-"+svc+"'s deployment successful", func() bool {
		d = latestDeployment(t, n, svc)
		switch d.Status {
		case "successful":
			return true
		case "failed", "cancelled":
			t.Fatalf("switchyard-%s deployment %s %s", svc, d.ID, d.Status)
		}
		time.Sleep(200 * time.Millisecond)
		return false
	})
}

// passing is the host:port of a passing instance of a Consul service.
func passing(t *testing.T, c *api.Client, name string) string {
	t.Helper()
	var addr string
	deptest.Eventually(t, time.Minute, name+" passing in Consul", func() bool {
		entries, _, err := c.Health().Service(name, "", true, nil)
		if err != nil || len(entries) == 0 {
			time.Sleep(100 * time.Millisecond)
			return false
		}
		addr = fmt.Sprintf("%s:%d", entries[0].Service.Address, entries[0].Service.Port)
		return true
	})
	return addr
}

// releaseBuild is the one `make release` of a test process.
var releaseBuild struct {
	once sync.Once
	dir  string
	err  error
}

// release builds every service's release archives (cmd/release) into a
// temporary directory, once per test process. SWITCHYARD_E2E_DIST names
// a directory of archives already built (make release DIST=...) to
// rerun the test without the build (~2 min on 2 cores); it is copied, as
// the test adds an archive.
func release(t *testing.T) string {
	t.Helper()
	releaseBuild.once.Do(func() {
		if src := os.Getenv("SWITCHYARD_E2E_DIST"); src != "" {
			releaseBuild.dir, releaseBuild.err = copyDir(src)
			return
		}
		if releaseBuild.dir, releaseBuild.err = os.MkdirTemp("", "switchyard-e2e-dist"); releaseBuild.err != nil {
			return
		}
		start := time.Now()
		cmd := exec.Command("go", "run", "./cmd/release", "-out", releaseBuild.dir)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			releaseBuild.err = fmt.Errorf("go run ./cmd/release: %w\n%s", err, out)
		}
		t.Logf("release archives built in %v", time.Since(start).Round(time.Second))
	})
	if releaseBuild.err != nil {
		t.Fatal(releaseBuild.err)
	}
	return releaseBuild.dir
}

// repackRelease writes svc's archive again under version (its top
// directory renamed) and returns the version and the new archive's
// SHA-256.
func repackRelease(t *testing.T, dist, svc, version string) (string, string) {
	t.Helper()
	sums, err := os.ReadFile(filepath.Join(dist, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)  (` + regexp.QuoteMeta(svc) + `-[0-9][^ ]*-linux-amd64)\.tar\.gz$`).FindSubmatch(sums)
	if m == nil {
		t.Fatalf("no %s archive in SHA256SUMS:\n%s", svc, sums)
	}
	oldBase, newBase := string(m[1]), svc+"-"+version+"-linux-amd64"
	f, err := os.Open(filepath.Join(dist, oldBase+".tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tr, tw := tar.NewReader(zr), tar.NewWriter(zw)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		hdr.Name = newBase + strings.TrimPrefix(hdr.Name, oldBase)
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dist, newBase+".tar.gz"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(buf.Bytes())
	return version, hex.EncodeToString(s[:])
}

// copyDir copies the files of src into a new temporary directory.
func copyDir(src string) (string, error) {
	dst, err := os.MkdirTemp("", "switchyard-e2e-dist")
	if err != nil {
		return "", err
	}
	return dst, os.CopyFS(dst, os.DirFS(src))
}
