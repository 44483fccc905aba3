package chaos

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"switchyard.dev/libs/mesh/tlsconf/certgen"
)

// The suite runs the mesh with mutual TLS between services, as a
// deployment would (CHAOS_TLS=0 for plaintext): every service presents a
// certificate of one local CA and requires one from its callers, KV
// transfers included; the frontends serve their OpenAI API with the same
// certificate and ask clients for none. The harness calls the services as
// a mesh member does, with that certificate.

// meshConn is how the harness reaches the services: the scheme of their
// URLs and the transport that speaks it.
type meshConn struct {
	scheme    string
	transport *http.Transport
	args      []string // the -tls-* flags every service gets
	public    []string // the frontends' -public-tls-* flags
}

// mesh is the stack's connection settings, set by StartStack before any
// process starts (one stack per test process).
var mesh = plainMesh()

func plainMesh() meshConn {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return meshConn{scheme: "http", transport: &http.Transport{Protocols: p, MaxIdleConnsPerHost: 64}}
}

// tlsOn reports whether the suite runs with mutual TLS (the default).
func tlsOn() bool { return os.Getenv("CHAOS_TLS") != "0" }

// tlsMesh makes the CA and the certificate in dir and the settings that
// use them.
func tlsMesh(dir string) (meshConn, error) {
	if _, err := certgen.Ensure(dir, []string{"mesh"}, []string{"127.0.0.1", "localhost"}); err != nil {
		return meshConn{}, err
	}
	crt, key, ca := filepath.Join(dir, "mesh.crt"), filepath.Join(dir, "mesh.key"), filepath.Join(dir, "ca.crt")
	pair, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		return meshConn{}, fmt.Errorf("chaos: mesh certificate: %w", err)
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		return meshConn{}, fmt.Errorf("chaos: CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return meshConn{}, fmt.Errorf("chaos: %s holds no certificate", ca)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	return meshConn{
		scheme: "https",
		transport: &http.Transport{Protocols: p, MaxIdleConnsPerHost: 64, ForceAttemptHTTP2: true,
			TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}},
		args:   []string{"-tls-cert", crt, "-tls-key", key, "-tls-ca", ca},
		public: []string{"-public-tls-cert", crt, "-public-tls-key", key},
	}, nil
}

// url is a service's base URL.
func (m meshConn) url(addr string) string { return m.scheme + "://" + addr }

// client is an HTTP client over the mesh transport, with a timeout (0:
// none).
func (m meshConn) client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: m.transport, Timeout: timeout}
}
