package service_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	meshv1 "switchyard.dev/gen/switchyard/mesh/v1"
	"switchyard.dev/gen/switchyard/mesh/v1/meshv1connect"
	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/discovery/disctest"
	"switchyard.dev/libs/mesh/discovery/filedisc"
	"switchyard.dev/libs/mesh/meshtest"
	"switchyard.dev/libs/mesh/service"
	"switchyard.dev/libs/mesh/tlsconf"
	"switchyard.dev/libs/mesh/tlsconf/certgen"
)

// pki is a CA in a directory with leaves written beside it.
type pki struct {
	t   testing.TB
	dir string
	ca  *certgen.CA
}

func newPKI(t testing.TB, name string) *pki {
	t.Helper()
	ca, err := certgen.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{t: t, dir: t.TempDir(), ca: ca}
	if err := os.WriteFile(p.path("ca.crt"), ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// leaf writes a new certificate for 127.0.0.1 as name.crt/name.key and
// returns its serial number.
func (p *pki) leaf(name string) *big.Int {
	p.t.Helper()
	l, err := p.ca.Sign(name, certgen.LocalHosts)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := l.Write(p.dir, name); err != nil {
		p.t.Fatal(err)
	}
	c, err := tls.X509KeyPair(l.CertPEM, l.KeyPEM)
	if err != nil {
		p.t.Fatal(err)
	}
	return c.Leaf.SerialNumber
}

func (p *pki) reloader(name string) *tlsconf.Reloader {
	p.t.Helper()
	r, err := tlsconf.New(tlsconf.Files{Cert: p.path(name + ".crt"), Key: p.path(name + ".key"), CA: p.path("ca.crt")}, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	return r
}

func (p *pki) args(name string) []string {
	return []string{"-tls-cert", p.path(name + ".crt"), "-tls-key", p.path(name + ".key"), "-tls-ca", p.path("ca.crt"),
		"-tls-reload-interval", "20ms"}
}

func getInfo(ctx context.Context, hc *http.Client, url string) error {
	_, err := meshv1connect.NewInfoServiceClient(hc, url).GetInfo(ctx, connect.NewRequest(&meshv1.GetInfoRequest{}))
	return err
}

// servedSerial is the serial of the certificate a fresh handshake with
// addr is shown.
func servedSerial(t *testing.T, addr string, cfg *tls.Config) *big.Int {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

// waitServed polls fresh handshakes until addr shows the certificate
// with serial want.
func waitServed(t *testing.T, addr string, cfg *tls.Config, want *big.Int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for servedSerial(t, addr, cfg).Cmp(want) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s still serves the old certificate", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// With -tls-*, a service serves mutual TLS: callers with a certificate
// from the CA get through, others are refused at the handshake, it tells
// discovery to be dialled over https, and a rotated certificate is served
// to new connections without a restart while open ones carry on.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	mesh := newPKI(t, "mesh CA")
	mesh.leaf("server")
	mesh.leaf("caller")
	other := newPKI(t, "other CA")
	other.leaf("stranger")
	disc := t.TempDir()
	srv := meshtest.Start(t, spec(), append(mesh.args("server"), "-discovery-dir", disc, "-id", "planner-tls")...)
	url := "https://" + srv.Addr

	reg, err := filedisc.New(filedisc.Config{Dir: disc, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ins := disctest.Eventually(t, reg, discovery.RolePlanner, disctest.HasIDs("planner-tls"), "registered")
	if got := ins[0].URL(); got != url {
		t.Fatalf("registered URL %q, want %q", got, url)
	}

	caller := client.NewHTTPTLS(mesh.reloader("caller").DialTLS)
	if err := getInfo(t.Context(), caller, url); err != nil {
		t.Fatalf("caller with a certificate from the CA: %v", err)
	}

	roots := x509.NewCertPool()
	roots.AddCert(mesh.ca.Cert)
	noCert := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: roots}}}
	strangerCert := other.reloader("stranger").Certificate()
	// GetClientCertificate presents the certificate even though the
	// server names another CA as acceptable.
	stranger := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: roots,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return strangerCert, nil }}}}
	for name, hc := range map[string]*http.Client{"no certificate": noCert, "another CA's certificate": stranger} {
		err := getInfo(t.Context(), hc, url)
		if err == nil {
			t.Errorf("caller with %s got through", name)
			continue
		}
		// The server refuses at the handshake. Under TLS 1.3 the client
		// has finished its side by then, so what it sees depends on timing:
		// the server's alert, or the connection closed under its first
		// write. Either way no response came back.
		var ce *connect.Error
		if errors.As(err, &ce) && ce.Meta().Get("Content-Type") != "" {
			t.Errorf("caller with %s: %v, want the connection refused, not an answer", name, err)
		}
	}
	if err := getInfo(t.Context(), client.NewHTTP(), "http://"+srv.Addr); err == nil {
		t.Error("plaintext h2c caller got through")
	}

	// A CA-signed caller verifying a server signed by another CA refuses
	// it: the mesh CA is the only one trusted.
	if err := getInfo(t.Context(), client.NewHTTPTLS(other.reloader("stranger").DialTLS), url); err == nil {
		t.Error("client trusting another CA accepted the server")
	}

	probe := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{*mesh.reloader("caller").Certificate()}}
	next := mesh.leaf("server")
	waitServed(t, srv.Addr, probe, next)
	if err := getInfo(t.Context(), caller, url); err != nil {
		t.Fatalf("call after rotation: %v", err)
	}
}

// The public listener (the frontend's OpenAI API) serves its own
// certificate over HTTP/1.1 and HTTP/2 to callers without one, and picks
// up a rotated one without a restart.
func TestPublicTLSReload(t *testing.T) {
	t.Parallel()
	pub := newPKI(t, "public CA")
	pub.leaf("public")
	s := spec()
	s.Setup = func(_ context.Context, rt *service.Runtime) error {
		return rt.ServePublicTLS(pub.path("public.crt"), pub.path("public.key"))
	}
	srv := meshtest.Start(t, s, "-discovery", "none", "-tls-reload-interval", "20ms")
	roots := x509.NewCertPool()
	roots.AddCert(pub.ca.Cert)
	for _, h2 := range []bool{false, true} {
		hc := &http.Client{Transport: &http.Transport{ForceAttemptHTTP2: h2, TLSClientConfig: &tls.Config{RootCAs: roots}}}
		res, err := hc.Get("https://" + srv.Addr + "/live")
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if want := map[bool]int{false: 1, true: 2}[h2]; res.ProtoMajor != want || res.StatusCode != http.StatusOK {
			t.Errorf("GET /live: %s over HTTP/%d, want 200 over HTTP/%d", res.Status, res.ProtoMajor, want)
		}
	}
	next := pub.leaf("public")
	waitServed(t, srv.Addr, &tls.Config{RootCAs: roots}, next)
}

// Env.ReloadTLS (SIGHUP under Main) reloads the certificates at once,
// without waiting for the next periodic check.
func TestTLSReloadOnSignal(t *testing.T) {
	t.Parallel()
	mesh := newPKI(t, "mesh CA")
	mesh.leaf("server")
	mesh.leaf("caller")
	hup := make(chan os.Signal, 1)
	args := append(mesh.args("server"), "-discovery", "none", "-tls-reload-interval", "1h")
	srv := meshtest.StartEnv(t, spec(), service.Env{ReloadTLS: hup}, args...)
	roots := x509.NewCertPool()
	roots.AddCert(mesh.ca.Cert)
	probe := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{*mesh.reloader("caller").Certificate()}}
	next := mesh.leaf("server")
	hup <- syscall.SIGHUP
	waitServed(t, srv.Addr, probe, next)
}
