// Package certgen makes the certificates of a local or test mesh: a CA
// and leaf certificates it signs, each good for both ends of a
// connection (server and client authentication) and naming the hosts it
// serves on, 127.0.0.1 and localhost for the local stack. It is for
// development and tests; production certificates come from the
// operator's own CA.
package certgen

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Validity is how long the certificates made here last.
const Validity = 365 * 24 * time.Hour

// renewBefore: an existing certificate closer than this to its expiry is
// made again.
const renewBefore = 30 * 24 * time.Hour

// LocalHosts are the names of the local stack's hosts.
var LocalHosts = []string{"127.0.0.1", "::1", "localhost"}

// CA is a certificate authority that can sign leaves.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte // Cert, PEM-encoded
}

// Leaf is a signed certificate and its key, PEM-encoded.
type Leaf struct {
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA makes a self-signed CA called name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certgen: CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"switchyard"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certgen: CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certgen: CA: %w", err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Sign makes a leaf certificate for name, valid for hosts (IPs become IP
// SANs, the rest DNS SANs), for server and client authentication.
func (ca *CA) Sign(name string, hosts []string) (Leaf, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Leaf{}, fmt.Errorf("certgen: %s key: %w", name, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"switchyard"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return Leaf{}, fmt.Errorf("certgen: %s: %w", name, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Leaf{}, fmt.Errorf("certgen: %s key: %w", name, err)
	}
	return Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	}, nil
}

// Write writes the leaf to dir/name.crt and dir/name.key (the key
// readable by its owner only), each through a rename so a reader never
// sees half a file.
func (l Leaf) Write(dir, name string) error {
	if err := writeFile(filepath.Join(dir, name+".key"), l.KeyPEM, 0o600); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, name+".crt"), l.CertPEM, 0o644)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("certgen: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("certgen: %w", err)
	}
	return nil
}

// Ensure makes dir/ca.crt (with ca.key) and, for each name, dir/name.crt
// and dir/name.key valid for hosts, keeping what is already there and
// still good: signed by the CA in dir, naming every host, and not near
// expiry. It reports the names it (re)made; a second run makes none.
func Ensure(dir string, names, hosts []string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("certgen: %w", err)
	}
	var made []string
	ca, err := loadCA(dir)
	if err != nil {
		if ca, err = NewCA("switchyard local CA"); err != nil {
			return nil, err
		}
		kder, err := x509.MarshalPKCS8PrivateKey(ca.Key)
		if err != nil {
			return nil, fmt.Errorf("certgen: CA key: %w", err)
		}
		if err := (Leaf{CertPEM: ca.PEM, KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})}).Write(dir, "ca"); err != nil {
			return nil, err
		}
		made = append(made, "ca")
	}
	for _, name := range names {
		if leafGood(ca, filepath.Join(dir, name+".crt"), hosts) {
			continue
		}
		l, err := ca.Sign(name, hosts)
		if err != nil {
			return nil, err
		}
		if err := l.Write(dir, name); err != nil {
			return nil, err
		}
		made = append(made, name)
	}
	return made, nil
}

func loadCA(dir string) (*CA, error) {
	cpem, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	kpem, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(cpem)
	kb, _ := pem.Decode(kpem)
	if cb == nil || kb == nil {
		return nil, errors.New("certgen: CA files are not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, err
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) || !cert.IsCA || time.Until(cert.NotAfter) < renewBefore {
		return nil, errors.New("certgen: CA unusable")
	}
	return &CA{Cert: cert, Key: key, PEM: cpem}, nil
}

func leafGood(ca *CA, path string, hosts []string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return false
	}
	cert, err := x509.ParseCertificate(b.Bytes)
	if err != nil || time.Until(cert.NotAfter) < renewBefore {
		return false
	}
	if _, err := os.Stat(path[:len(path)-len(".crt")] + ".key"); err != nil {
		return false
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	for _, h := range hosts {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: h, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
			return false
		}
	}
	return true
}
