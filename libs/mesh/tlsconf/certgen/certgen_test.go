package certgen_test

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"switchyard.dev/libs/mesh/tlsconf/certgen"
)

// Ensure makes a CA and leaves once; a second run keeps them, and a leaf
// that lost a host is made again.
func TestEnsureIdempotent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	made, err := certgen.Ensure(dir, []string{"router", "decode"}, certgen.LocalHosts)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"ca", "router", "decode"}; !slices.Equal(made, want) {
		t.Fatalf("first run made %q, want %q", made, want)
	}
	if made, err = certgen.Ensure(dir, []string{"router", "decode"}, certgen.LocalHosts); err != nil || len(made) != 0 {
		t.Fatalf("second run made %q (%v), want nothing", made, err)
	}
	if made, err = certgen.Ensure(dir, []string{"router"}, append([]string{"router.internal"}, certgen.LocalHosts...)); err != nil || !slices.Equal(made, []string{"router"}) {
		t.Fatalf("run with a new host made %q (%v), want router", made, err)
	}

	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "decode.crt"), filepath.Join(dir, "decode.key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		for _, h := range certgen.LocalHosts {
			if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: h, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
				t.Errorf("decode certificate for %s, usage %v: %v", h, usage, err)
			}
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "decode.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v (%v), want 0600", fi.Mode(), err)
	}
}
