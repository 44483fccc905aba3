// Package tlsconf turns certificate files into TLS configurations for
// Switchyard's internal traffic (mutual TLS between services) and its
// public listener, and keeps them current: the files are re-read when they
// change, so a rotated certificate or CA takes effect on the next
// handshake without a restart, while connections already open carry on
// with what they negotiated.
//
// Peers verify each other the standard way: a server's certificate must
// chain to the CA and name the host the client dialed (the host of the
// registered address: a DNS name or an IP SAN, 127.0.0.1 for the local
// stack); a client's certificate must chain to the CA. The CA, not a
// name, is what admits a caller, so every certificate the CA signs is a
// member of the mesh.
package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// DefaultReloadInterval is how often the files are checked for changes.
const DefaultReloadInterval = 5 * time.Second

// Files names the PEM files of one identity.
type Files struct {
	Cert string // this instance's certificate (chain), PEM
	Key  string // its private key, PEM
	// CA holds the certificates that sign peers. Empty means no peer
	// verification by this package: the public listener, which wants
	// no client certificates.
	CA string
}

// Reloader holds the current certificate, key and CA pool read from Files
// and re-reads them when they change. Safe for concurrent use.
type Reloader struct {
	files Files
	log   *slog.Logger

	mu    sync.RWMutex
	cert  *tls.Certificate
	pool  *x509.CertPool
	stamp string // what the files looked like when last loaded
}

// New loads files now: a missing or bad file is an error at start-up, not
// at the first handshake.
func New(files Files, log *slog.Logger) (*Reloader, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reloader{files: files, log: log}
	if _, err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload re-reads the files if they changed since the last load and
// reports whether it loaded new ones. On error the previous certificate
// and CA stay in use (a rotation caught half-written is retried on the
// next check).
func (r *Reloader) Reload() (bool, error) {
	stamp, err := r.stampFiles()
	if err != nil {
		return false, err
	}
	r.mu.RLock()
	same := stamp == r.stamp
	r.mu.RUnlock()
	if same {
		return false, nil
	}
	cert, err := tls.LoadX509KeyPair(r.files.Cert, r.files.Key)
	if err != nil {
		return false, fmt.Errorf("tls: %s, %s: %w", r.files.Cert, r.files.Key, err)
	}
	var pool *x509.CertPool
	if r.files.CA != "" {
		pem, err := os.ReadFile(r.files.CA)
		if err != nil {
			return false, fmt.Errorf("tls: CA: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return false, fmt.Errorf("tls: CA %s: no PEM certificates", r.files.CA)
		}
	}
	r.mu.Lock()
	r.cert, r.pool, r.stamp = &cert, pool, stamp
	r.mu.Unlock()
	return true, nil
}

// stampFiles summarises the files' sizes and modification times: a
// rotation that replaces or rewrites any of them changes it.
func (r *Reloader) stampFiles() (string, error) {
	var s string
	for _, p := range []string{r.files.Cert, r.files.Key, r.files.CA} {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("tls: %w", err)
		}
		s += fmt.Sprintf("%s:%d:%d;", p, fi.Size(), fi.ModTime().UnixNano())
	}
	return s, nil
}

// Watch checks the files every interval (DefaultReloadInterval if not
// positive) until ctx ends, logging each reload and each failed one.
func (r *Reloader) Watch(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultReloadInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		switch ok, err := r.Reload(); {
		case err != nil:
			r.log.Warn("TLS files unreadable; keeping the previous ones", "err", err)
		case ok:
			r.log.Info("TLS files reloaded", "cert", r.files.Cert)
		}
	}
}

func (r *Reloader) current() (*tls.Certificate, *x509.CertPool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cert, r.pool
}

// Certificate is the current certificate.
func (r *Reloader) Certificate() *tls.Certificate {
	c, _ := r.current()
	return c
}

// ServerConfig is the configuration of a listener serving r's
// certificate. With a CA and requireClient, every client must present a
// certificate that chains to it; with a CA and not requireClient, one is
// verified if presented; without a CA, none is asked for. Each handshake
// takes the files current at that moment. ALPN offers HTTP/2 and
// HTTP/1.1 (the OpenAI API, /metrics scrapers).
func (r *Reloader) ServerConfig(requireClient bool) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.Certificate(), nil
		},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := r.current()
			c := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				NextProtos:   []string{"h2", "http/1.1"},
				Certificates: []tls.Certificate{*cert},
			}
			switch {
			case pool != nil && requireClient:
				c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, pool
			case pool != nil:
				c.ClientAuth, c.ClientCAs = tls.VerifyClientCertIfGiven, pool
			}
			return c, nil
		},
	}
}

// ClientConfig is the configuration of one connection to serverName (the
// host of the address dialed, a DNS name or an IP): it presents r's
// certificate and verifies the server against r's CA, both as current now.
func (r *Reloader) ClientConfig(serverName string) (*tls.Config, error) {
	cert, pool := r.current()
	if pool == nil {
		return nil, errors.New("tls: no CA to verify servers with")
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2"},
		ServerName:   serverName,
		RootCAs:      pool,
		Certificates: []tls.Certificate{*cert},
	}, nil
}

// DialTLS is what an http.Transport's DialTLSContext needs: it dials addr
// and completes a handshake configured by ClientConfig for addr's host,
// so every new connection uses the files current when it is made.
func (r *Reloader) DialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("tls dial %q: %w", addr, err)
	}
	cfg, err := r.ClientConfig(host)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := tls.Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
	}
	return c, nil
}
