package tlsconf_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"switchyard.dev/libs/mesh/tlsconf"
	"switchyard.dev/libs/mesh/tlsconf/certgen"
)

func write(t *testing.T, dir string, ca *certgen.CA, name string) tlsconf.Files {
	t.Helper()
	l, err := ca.Sign(name, certgen.LocalHosts)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(dir, name); err != nil {
		t.Fatal(err)
	}
	f := tlsconf.Files{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"), CA: filepath.Join(dir, "ca.crt")}
	if err := os.WriteFile(f.CA, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// A rotation is loaded once; a broken one leaves the previous
// certificate in use and is an error.
func TestReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := certgen.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	files := write(t, dir, ca, "svc")
	r, err := tlsconf.New(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := r.Certificate().Leaf.SerialNumber
	if ok, err := r.Reload(); ok || err != nil {
		t.Fatalf("Reload of unchanged files = %v, %v; want false, nil", ok, err)
	}
	write(t, dir, ca, "svc")
	if ok, err := r.Reload(); !ok || err != nil {
		t.Fatalf("Reload of new files = %v, %v; want true, nil", ok, err)
	}
	second := r.Certificate().Leaf.SerialNumber
	if second.Cmp(first) == 0 {
		t.Fatal("reloaded certificate has the old serial")
	}
	if err := os.WriteFile(files.Key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reload(); err == nil {
		t.Fatal("Reload of a broken key succeeded")
	}
	if r.Certificate().Leaf.SerialNumber.Cmp(second) != 0 {
		t.Fatal("a broken rotation replaced the certificate")
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := certgen.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	good := write(t, dir, ca, "svc")
	notPEM := filepath.Join(dir, "junk")
	if err := os.WriteFile(notPEM, []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]tlsconf.Files{
		"missing cert": {Cert: filepath.Join(dir, "nope.crt"), Key: good.Key, CA: good.CA},
		"missing CA":   {Cert: good.Cert, Key: good.Key, CA: filepath.Join(dir, "nope.crt")},
		"CA not PEM":   {Cert: good.Cert, Key: good.Key, CA: notPEM},
		"key mismatch": {Cert: good.Cert, Key: write(t, t.TempDir(), ca, "other").Key, CA: good.CA},
	}
	for name, f := range tests {
		if _, err := tlsconf.New(f, nil); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// The server configuration asks for client certificates as told, and
// only when there is a CA to verify them with.
func TestServerConfigClientAuth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := certgen.NewCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	files := write(t, dir, ca, "svc")
	mesh, err := tlsconf.New(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	files.CA = ""
	public, err := tlsconf.New(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		r    *tlsconf.Reloader
		req  bool
		want tls.ClientAuthType
	}{
		{"mesh", mesh, true, tls.RequireAndVerifyClientCert},
		{"mesh, optional", mesh, false, tls.VerifyClientCertIfGiven},
		{"public", public, true, tls.NoClientCert},
	}
	for _, tt := range tests {
		c, err := tt.r.ServerConfig(tt.req).GetConfigForClient(&tls.ClientHelloInfo{})
		if err != nil {
			t.Fatal(err)
		}
		if c.ClientAuth != tt.want || len(c.Certificates) != 1 {
			t.Errorf("%s: client auth %v with %d certificates, want %v with 1", tt.name, c.ClientAuth, len(c.Certificates), tt.want)
		}
	}
	if _, err := public.ClientConfig("127.0.0.1"); err == nil {
		t.Error("ClientConfig without a CA succeeded")
	}
}
