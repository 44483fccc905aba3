// Package config holds the flags every Switchyard service shares, and turns
// them into a logger and a discovery registry. Validation happens before
// anything starts, so a bad setting is a one-line error naming the flag and
// the value, and nothing is left half-registered.
package config

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"switchyard.dev/libs/mesh/discovery"
	"switchyard.dev/libs/mesh/discovery/consuldisc"
	"switchyard.dev/libs/mesh/discovery/filedisc"
	"switchyard.dev/libs/mesh/reqid"
	"switchyard.dev/libs/mesh/rpclimit"
	"switchyard.dev/libs/mesh/tlsconf"
)

// Common are the shared settings.
type Common struct {
	Listen       string
	Advertise    string
	InstanceID   string
	Discovery    string
	DiscoveryDir string
	ConsulAddr   string
	ConsulToken  string
	LogLevel     string
	LogFormat    string
	Tags         string
	DrainTimeout time.Duration
	// DeregisterGrace is how long shutdown keeps serving, and background
	// work keeps running, after the instance left discovery: routers and
	// frontends see it gone before it refuses work.
	DeregisterGrace time.Duration
	Pprof           bool
	// RPC bounds every RPC the service serves and, through
	// Runtime.ClientOptions, makes (package rpclimit).
	RPC rpclimit.Limits
	// TLS is mutual TLS between services (off when TLS.Cert is empty).
	TLS TLS
	// HealthListen, if set, is a second host:port serving only /live,
	// /ready and /health over plain HTTP: orchestrators' health checks
	// cannot present a mesh certificate (package server).
	HealthListen string
}

// TLS are the -tls-* settings: this instance's certificate and the CA that
// signs its peers. With them set, the instance serves TLS and requires
// callers' certificates, and calls its peers over TLS presenting its own.
type TLS struct {
	Cert, Key, CA     string
	RequireClientCert bool
	ReloadInterval    time.Duration
}

// Enabled reports whether mutual TLS is on.
func (t TLS) Enabled() bool { return t.Cert != "" }

// Files names the files of t.
func (t TLS) Files() tlsconf.Files { return tlsconf.Files{Cert: t.Cert, Key: t.Key, CA: t.CA} }

func (t TLS) validate() error {
	set := 0
	for _, v := range []string{t.Cert, t.Key, t.CA} {
		if v != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		return fmt.Errorf("-tls-cert=%q -tls-key=%q -tls-ca=%q: set all three or none", t.Cert, t.Key, t.CA)
	}
	if t.ReloadInterval <= 0 {
		return fmt.Errorf("-tls-reload-interval=%v: must be positive", t.ReloadInterval)
	}
	return nil
}

// DefaultDiscoveryDir is where the file backend keeps records by default.
func DefaultDiscoveryDir() string {
	return filepath.Join(os.TempDir(), "switchyard", "discovery")
}

// Register adds the shared flags to fs, with environment overrides
// (SWITCHYARD_DISCOVERY, SWITCHYARD_DISCOVERY_DIR, CONSUL_HTTP_ADDR,
// CONSUL_HTTP_TOKEN) as defaults.
func (c *Common) Register(fs *flag.FlagSet, defaultListen string, getenv func(string) string) {
	env := func(k, def string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return def
	}
	fs.StringVar(&c.Listen, "listen", defaultListen, "host:port to serve on (port 0 picks a free one)")
	fs.StringVar(&c.Advertise, "advertise", "", "host:port published in discovery (default: the bound address)")
	fs.StringVar(&c.InstanceID, "id", "", "instance id in discovery (default: <role>-<random>)")
	fs.StringVar(&c.Discovery, "discovery", env("SWITCHYARD_DISCOVERY", "file"), "discovery backend: file, consul or none")
	fs.StringVar(&c.DiscoveryDir, "discovery-dir", env("SWITCHYARD_DISCOVERY_DIR", DefaultDiscoveryDir()), "directory of the file discovery backend")
	fs.StringVar(&c.ConsulAddr, "consul-addr", env("CONSUL_HTTP_ADDR", "127.0.0.1:8500"), "Consul agent HTTP address")
	fs.StringVar(&c.ConsulToken, "consul-token", getenv("CONSUL_HTTP_TOKEN"), "Consul ACL token")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "text", "text or json")
	fs.StringVar(&c.Tags, "tags", "", "comma-separated discovery tags (e.g. canary)")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", 10*time.Second, "how long in-flight requests may finish on shutdown")
	fs.DurationVar(&c.DeregisterGrace, "deregister-grace", 0, "on shutdown, keep serving this long after leaving discovery, so peers stop sending work first (Nomad jobs use 2s; 0 refuses new work at once, which peers retry elsewhere; no effect with -discovery=none)")
	fs.BoolVar(&c.Pprof, "pprof", false, "serve Go's profiler at /debug/pprof/ on the listen address (for diagnosis; off in production)")
	fs.IntVar(&c.RPC.MaxMessageBytes, "rpc-max-message-bytes", rpclimit.DefaultMaxMessageBytes,
		"largest RPC message served or sent, in bytes; a larger one fails with resource_exhausted (a worker's GetModelInfo carries its tokenizer)")
	fs.DurationVar(&c.RPC.UnaryTimeout, "rpc-timeout", rpclimit.DefaultUnaryTimeout,
		"deadline of a unary RPC whose caller set none, served or sent (streams have none)")
	fs.StringVar(&c.TLS.Cert, "tls-cert", "", "this instance's certificate (PEM) for mutual TLS with its peers; off (plaintext h2c) when empty")
	fs.StringVar(&c.TLS.Key, "tls-key", "", "private key (PEM) of -tls-cert")
	fs.StringVar(&c.TLS.CA, "tls-ca", "", "CA certificates (PEM) that sign peers' certificates, servers' and callers' alike")
	fs.BoolVar(&c.TLS.RequireClientCert, "tls-require-client-cert", true, "with -tls-cert, refuse callers without a certificate signed by -tls-ca")
	fs.DurationVar(&c.TLS.ReloadInterval, "tls-reload-interval", tlsconf.DefaultReloadInterval, "how often the -tls-* files are checked for a rotation")
	fs.StringVar(&c.HealthListen, "health-listen", "", "host:port also serving GET /live, /ready and /health (nothing else) over plain HTTP, without TLS or a client certificate, for an orchestrator's health checks; off when empty")
}

// Validate checks every shared setting.
func (c *Common) Validate() error {
	if err := checkHostPort("-listen", c.Listen, true); err != nil {
		return err
	}
	if c.Advertise != "" {
		if err := checkHostPort("-advertise", c.Advertise, false); err != nil {
			return err
		}
		if host, _, _ := net.SplitHostPort(c.Advertise); unspecified(host) {
			return fmt.Errorf("-advertise=%q: peers need a host to dial, not a wildcard", c.Advertise)
		}
	}
	if c.InstanceID != "" && !discovery.ValidID(c.InstanceID) {
		return fmt.Errorf("-id=%q: want 1-128 of [A-Za-z0-9_.-]", c.InstanceID)
	}
	if host, _, _ := net.SplitHostPort(c.Listen); c.Advertise == "" && unspecified(host) && c.Discovery == "consul" {
		// Published as is, [::]:port would send every other host to itself.
		return fmt.Errorf("-listen=%q binds every interface: set -advertise to the host:port peers should dial", c.Listen)
	}
	switch c.Discovery {
	case "file":
		if c.DiscoveryDir == "" {
			return fmt.Errorf("-discovery-dir: empty")
		}
	case "consul":
		if err := checkHostPort("-consul-addr", c.ConsulAddr, false); err != nil {
			return err
		}
	case "none":
	default:
		return fmt.Errorf("-discovery=%q: want file, consul or none", c.Discovery)
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return err
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		return fmt.Errorf("-log-format=%q: want text or json", c.LogFormat)
	}
	if c.DrainTimeout < 0 {
		return fmt.Errorf("-drain-timeout=%v: must not be negative", c.DrainTimeout)
	}
	if c.DeregisterGrace < 0 || c.DeregisterGrace > time.Minute {
		return fmt.Errorf("-deregister-grace=%v: want 0 to 1m", c.DeregisterGrace)
	}
	if c.RPC.MaxMessageBytes < minMessageBytes {
		return fmt.Errorf("-rpc-max-message-bytes=%d: want at least %d", c.RPC.MaxMessageBytes, minMessageBytes)
	}
	if c.RPC.UnaryTimeout <= 0 {
		return fmt.Errorf("-rpc-timeout=%v: must be positive", c.RPC.UnaryTimeout)
	}
	if err := c.validateHealthListen(); err != nil {
		return err
	}
	return c.TLS.validate()
}

func (c *Common) validateHealthListen() error {
	if c.HealthListen == "" {
		return nil
	}
	if err := checkHostPort("-health-listen", c.HealthListen, true); err != nil {
		return err
	}
	if c.HealthListen == c.Listen && !strings.HasSuffix(c.Listen, ":0") {
		return fmt.Errorf("-health-listen=%q: the same address as -listen", c.HealthListen)
	}
	return nil
}

// minMessageBytes is the smallest -rpc-max-message-bytes: below it even
// health checks and small control messages would not fit.
const minMessageBytes = 64 << 10

// unspecified reports whether host names no host: empty, 0.0.0.0 or ::.
func unspecified(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

func checkHostPort(flagName, v string, allowZero bool) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("%s=%q: want host:port", flagName, v)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 || (p == 0 && !allowZero) {
		return fmt.Errorf("%s=%q: bad port %q", flagName, v, port)
	}
	if host != "" && net.ParseIP(host) == nil && !validHostname(host) {
		return fmt.Errorf("%s=%q: bad host %q", flagName, v, host)
	}
	return nil
}

func validHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if r != '-' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
				return false
			}
		}
	}
	return true
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("-log-level=%q: want debug, info, warn or error", s)
	}
	return l, nil
}

// Logger builds the service's logger writing to w. A line logged with a
// request's context carries its request_id (package reqid).
func (c *Common) Logger(w io.Writer, role string) *slog.Logger {
	level, _ := parseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if c.LogFormat == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(reqid.LogHandler(h)).With("service", role)
}

// ID returns the instance id, generating one if none was set.
func (c *Common) ID(role string) string {
	if c.InstanceID != "" {
		return c.InstanceID
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	c.InstanceID = role + "-" + hex.EncodeToString(b[:])
	return c.InstanceID
}

// TagList splits -tags.
func (c *Common) TagList() []string {
	var out []string
	for _, t := range strings.Split(c.Tags, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// OpenRegistry opens the configured discovery backend (nil for "none"). An
// unreachable Consul is an error here, at start-up.
func (c *Common) OpenRegistry(ctx context.Context, log *slog.Logger) (discovery.Registry, error) {
	switch c.Discovery {
	case "file":
		r, err := filedisc.New(filedisc.Config{Dir: c.DiscoveryDir, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("-discovery-dir=%q: %w", c.DiscoveryDir, err)
		}
		return r, nil
	case "consul":
		r, err := consuldisc.New(ctx, consuldisc.Config{Address: c.ConsulAddr, Token: c.ConsulToken, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("-consul-addr=%q: %w", c.ConsulAddr, err)
		}
		return r, nil
	}
	return nil, nil
}
