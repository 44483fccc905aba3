package worker_test

import (
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"switchyard.dev/gen/switchyard/worker/v1/workerv1connect"
	"switchyard.dev/libs/engine/llama"
	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/meshtest"
	"switchyard.dev/libs/mesh/tlsconf"
	"switchyard.dev/libs/mesh/tlsconf/certgen"
	"switchyard.dev/libs/worker"
)

// mtlsPKI makes a CA and the certificates of prefill, decode and frontend
// in dir, and returns the -tls-* flags of name.
func mtlsArgs(t *testing.T, dir, name string) []string {
	t.Helper()
	if _, err := certgen.Ensure(dir, []string{"prefill", "decode", "frontend"}, certgen.LocalHosts); err != nil {
		t.Fatal(err)
	}
	return []string{"-tls-cert", filepath.Join(dir, name+".crt"), "-tls-key", filepath.Join(dir, name+".key"), "-tls-ca", filepath.Join(dir, "ca.crt")}
}

func mtlsClient(t *testing.T, dir string) *http.Client {
	t.Helper()
	r, err := tlsconf.New(tlsconf.Files{Cert: filepath.Join(dir, "frontend.crt"), Key: filepath.Join(dir, "frontend.key"), CA: filepath.Join(dir, "ca.crt")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return client.NewHTTPTLS(r.DialTLS)
}

// Remote prefill works under mutual TLS end to end: the decode worker
// calls the prefill worker over https, and the prefill worker writes the
// KV through the tcp backend's TLS, with the engine's own output.
func TestDisaggregatedGenerateTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mtlsArgs(t, dir, "prefill")
	args := func(role string, more ...string) []string {
		return append(append([]string{"-listen", "127.0.0.1:0", "-discovery", "none", "-seed", "7"}, mtlsArgs(t, dir, role)...), more...)
	}
	pre := meshtest.Start(t, worker.Spec("prefill", "v0.0.0-test", "127.0.0.1:0"), args("prefill")...)
	dec := meshtest.Start(t, worker.Spec("decode", "v0.0.0-test", "127.0.0.1:0"), args("decode", "-disagg-threshold-tokens", "32")...)
	exec, err := llama.NewTinyRandom(llama.Config{}, 7, llama.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hc := mtlsClient(t, dir)
	prompt := exec.Tokenizer().Encode(strings.Repeat("a long prompt that goes to the prefill worker; ", 4), true, false)
	r := req(worker.TinyRandomName, prompt, 16)
	r.Msg.PrefillWorker = "https://" + pre.Addr
	got, err := collect(t, workerv1connect.NewWorkerServiceClient(hc, "https://"+dec.Addr), r)
	if err != nil {
		t.Fatal(err)
	}
	if want := direct(t, exec, prompt, 16); !slices.Equal(got.tokens, want) {
		t.Fatalf("tokens %v, want %v", got.tokens, want)
	}
	res, err := hc.Get("https://" + dec.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(body), `path="remote"} 1`) {
		t.Errorf("decode worker did not prefill remotely:\n%s\n%s", pre.Log(), dec.Log())
	}
}

// A worker with -tls-* generates for a caller holding a certificate from
// the mesh CA and refuses everyone else before any request is read.
func TestGenerateNeedsClientCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := certgen.Ensure(dir, []string{"decode", "frontend"}, certgen.LocalHosts); err != nil {
		t.Fatal(err)
	}
	p := func(name string) string { return filepath.Join(dir, name) }
	r := meshtest.Start(t, worker.Spec("decode", "v0.0.0-test", "127.0.0.1:0"),
		"-listen", "127.0.0.1:0", "-discovery", "none", "-executor", "sim", "-sim-speedup", "0", "-sim-vocab", "1000", "-model-name", "mock",
		"-tls-cert", p("decode.crt"), "-tls-key", p("decode.key"), "-tls-ca", p("ca.crt"))
	url := "https://" + r.Addr

	frontend, err := tlsconf.New(tlsconf.Files{Cert: p("frontend.crt"), Key: p("frontend.key"), CA: p("ca.crt")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	authed := workerv1connect.NewWorkerServiceClient(client.NewHTTPTLS(frontend.DialTLS), url)
	res, err := collect(t, authed, req("mock", []uint32{1, 2, 3}, 4))
	if err != nil || len(res.tokens) != 4 {
		t.Fatalf("authenticated Generate: %d tokens, %v; want 4", len(res.tokens), err)
	}

	noCert := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the test is about the server refusing
	_, err = collect(t, workerv1connect.NewWorkerServiceClient(noCert, url), req("mock", []uint32{1, 2, 3}, 4))
	if err == nil {
		t.Fatal("Generate without a client certificate succeeded")
	}
	// The handshake fails, so no answer comes back: what the client makes
	// of the broken connection (unavailable, or canceled for a write to a
	// closed pipe) is its own, but it must not be an error the worker sent.
	var ce *connect.Error
	if errors.As(err, &ce) && connect.IsWireError(ce) {
		t.Errorf("Generate without a client certificate: the worker answered %v, want a transport failure", err)
	}
	if _, err := collect(t, workerv1connect.NewWorkerServiceClient(client.NewHTTP(), "http://"+r.Addr), req("mock", []uint32{1}, 1)); err == nil {
		t.Fatal("plaintext Generate succeeded")
	}
}
