package tcp_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/backend/tcp"
	"switchyard.dev/libs/nixl/nixltest"
)

// testCA signs certificates for 127.0.0.1.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool}
}

func (ca *testCA) leaf(t testing.TB) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "agent"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// mtls is the backend's TLS with cert, trusting trust for both ends.
func mtls(cert tls.Certificate, trust *x509.CertPool) *tcp.TLS {
	return &tcp.TLS{
		Server: &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: trust},
		Client: func(host string) (*tls.Config, error) {
			return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: trust, ServerName: host}, nil
		},
	}
}

func TestContractTLS(t *testing.T) {
	ca := newTestCA(t)
	nixltest.Run(t, func(tb testing.TB) (a, b nixl.BackendFactory) {
		return tcp.New(tcp.Config{TLS: mtls(ca.leaf(tb), ca.pool)}), tcp.New(tcp.Config{TLS: mtls(ca.leaf(tb), ca.pool)})
	}, nixltest.Caps{RemoteValidation: true, Backend: tcp.Name})
}

type agent struct {
	*nixl.Agent
	mem    []byte
	region nixl.RegionID
}

func newAgent(t *testing.T, name string, f nixl.BackendFactory) agent {
	t.Helper()
	a, err := nixl.NewAgent(nixl.Config{Name: name, Backends: []nixl.BackendFactory{f}})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := arena.Map(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(); _ = ar.Close() })
	id, err := a.RegisterMemory(ar.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return agent{Agent: a, mem: ar.Bytes(), region: id}
}

// write posts a write of init's first 4 KiB into target's region.
func write(t *testing.T, init, target agent) error {
	t.Helper()
	md, err := target.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := init.LoadRemoteMetadata(md); err != nil {
		return err
	}
	x, err := init.Post(nixl.XferRequest{Op: nixl.Write, Peer: "target",
		Local:  []nixl.Desc{{Region: init.region, Len: 4096}},
		Remote: []nixl.Desc{{Region: target.region, Len: 4096}}})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	return x.Wait(ctx)
}

// A target with TLS takes writes only from peers whose certificate its
// CA signed: a plaintext peer, or one with another CA's certificate, is
// dropped at the handshake and the region is left untouched.
func TestTLSRefusesUnauthenticatedWrites(t *testing.T) {
	t.Parallel()
	mesh, other := newTestCA(t), newTestCA(t)
	trustBoth := x509.NewCertPool()
	trustBoth.AddCert(mesh.cert)
	trustBoth.AddCert(other.cert)
	tests := []struct {
		name string
		cfg  tcp.Config
		ok   bool
	}{
		{"certificate from the CA", tcp.Config{TLS: mtls(mesh.leaf(t), mesh.pool)}, true},
		{"plaintext", tcp.Config{}, false},
		// Trusts the target, but the target does not trust it.
		{"certificate from another CA", tcp.Config{TLS: mtls(other.leaf(t), trustBoth)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			target := newAgent(t, "target", tcp.New(tcp.Config{TLS: mtls(mesh.leaf(t), mesh.pool), IOTimeout: 5 * time.Second}))
			init := newAgent(t, "init", tcp.New(tt.cfg))
			for i := range 4096 {
				init.mem[i] = byte(i%251 + 1)
			}
			err := write(t, init, target)
			if tt.ok != (err == nil) {
				t.Fatalf("write: %v, want success %v", err, tt.ok)
			}
			for i, b := range target.mem[:4096] {
				if want := byte(0); !tt.ok && b != want {
					t.Fatalf("target byte %d = %d after a refused write, want 0", i, b)
				}
			}
			if tt.ok && target.mem[100] != init.mem[100] {
				t.Fatal("authenticated write did not land")
			}
		})
	}
}

// BenchmarkTCPTLS is BenchmarkTCP over mutual TLS: the cost of
// encrypting every KV byte.
func BenchmarkTCPTLS(b *testing.B) {
	ca := newTestCA(b)
	nixltest.Bench(b, func(tb testing.TB) (x, y nixl.BackendFactory) {
		return tcp.New(tcp.Config{TLS: mtls(ca.leaf(tb), ca.pool)}), tcp.New(tcp.Config{TLS: mtls(ca.leaf(tb), ca.pool)})
	})
}
