package app

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"math/big"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/meshtest"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/libs/mesh/tlsconf/certgen"
	"switchyard.dev/services/frontend/internal/upstreamtest"
)

// writePublic writes a new public.crt/public.key signed by ca into dir
// and returns its serial.
func writePublic(t *testing.T, ca *certgen.CA, dir string) *big.Int {
	t.Helper()
	l, err := ca.Sign("public", certgen.LocalHosts)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(dir, "public"); err != nil {
		t.Fatal(err)
	}
	c, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return c.Leaf.SerialNumber
}

// With -public-tls-cert the OpenAI API is served over TLS to clients
// without certificates, HTTP/1.1 included, and a rotated certificate is
// served to new connections without a restart.
func TestPublicTLS(t *testing.T) {
	t.Parallel()
	ca, err := certgen.NewCA("public CA")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writePublic(t, ca, dir)
	router := upstreamtest.StartRouter(t, upstreamtest.StartWorker(t, upstreamtest.WorkerConfig{ID: "w1"}))
	r := meshtest.Start(t, Spec("v0.0.0-test", nil), "-listen", "127.0.0.1:0", "-discovery", "none", "-router-url", router.URL,
		"-public-tls-cert", filepath.Join(dir, "public.crt"), "-public-tls-key", filepath.Join(dir, "public.key"), "-tls-reload-interval", "20ms")
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	res, err := hc.Get("https://" + r.Addr + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK || res.ProtoMajor != 1 {
		t.Fatalf("GET /v1/models: %s over HTTP/%d: %s", res.Status, res.ProtoMajor, body)
	}

	next := writePublic(t, ca, dir)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := tls.Dial("tcp", r.Addr, &tls.Config{RootCAs: roots})
		if err != nil {
			t.Fatal(err)
		}
		got := c.ConnectionState().PeerCertificates[0].SerialNumber
		_ = c.Close()
		if got.Cmp(next) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rotated public certificate was never served")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPublicTLSFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-public-tls-cert", "a.crt"},
		{"-public-tls-key", "a.key"},
	} {
		env := service.Env{Args: append([]string{"-discovery", "none", "-router-url", "http://127.0.0.1:1"}, args...), Stdout: io.Discard, Stderr: io.Discard}
		if cmd, code := service.Prepare(Spec("v0.0.0-test", nil), env); cmd != nil || code != service.ExitUsage {
			t.Errorf("%q: exit %d, want %d (usage)", args, code, service.ExitUsage)
		}
	}
}
