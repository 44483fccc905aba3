package config

import (
	"bytes"
	"flag"
	"strings"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/reqid"
	"switchyard.dev/libs/mesh/rpclimit"
)

func parse(t *testing.T, args ...string) (*Common, error) {
	t.Helper()
	var c Common
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.Register(fs, "127.0.0.1:0", func(string) string { return "" })
	if err := fs.Parse(append([]string{"-discovery", "none"}, args...)); err != nil {
		t.Fatal(err)
	}
	return &c, c.Validate()
}

func TestRPCFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want rpclimit.Limits
		err  string
	}{
		{nil, rpclimit.Limits{MaxMessageBytes: rpclimit.DefaultMaxMessageBytes, UnaryTimeout: rpclimit.DefaultUnaryTimeout}, ""},
		{[]string{"-rpc-max-message-bytes", "134217728", "-rpc-timeout", "1m"}, rpclimit.Limits{MaxMessageBytes: 128 << 20, UnaryTimeout: time.Minute}, ""},
		{[]string{"-rpc-max-message-bytes", "1000"}, rpclimit.Limits{}, "-rpc-max-message-bytes=1000"},
		{[]string{"-rpc-timeout", "0s"}, rpclimit.Limits{}, "-rpc-timeout=0s"},
	}
	for _, tt := range tests {
		c, err := parse(t, tt.args...)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want one naming %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if c.RPC != tt.want {
			t.Errorf("%q: limits %+v, want %+v", tt.args, c.RPC, tt.want)
		}
	}
}

// The service logger puts the request id of a line's context on it.
func TestLoggerRequestID(t *testing.T) {
	t.Parallel()
	c, err := parse(t, "-log-format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	c.Logger(&buf, "router").InfoContext(reqid.With(t.Context(), "r-1"), "route")
	if got := buf.String(); !strings.Contains(got, `"request_id":"r-1"`) || !strings.Contains(got, `"service":"router"`) {
		t.Errorf("log line %s; want request_id and service", got)
	}
}

func TestTLSFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args    []string
		enabled bool
		err     string
	}{
		{nil, false, ""},
		{[]string{"-tls-cert", "a.crt", "-tls-key", "a.key", "-tls-ca", "ca.crt"}, true, ""},
		{[]string{"-tls-cert", "a.crt"}, false, "set all three or none"},
		{[]string{"-tls-key", "a.key", "-tls-ca", "ca.crt"}, false, "set all three or none"},
		{[]string{"-tls-reload-interval", "0s"}, false, "-tls-reload-interval=0s"},
	}
	for _, tt := range tests {
		c, err := parse(t, tt.args...)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want one naming %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if c.TLS.Enabled() != tt.enabled || !c.TLS.RequireClientCert {
			t.Errorf("%q: TLS %+v, want enabled=%v and client certificates required", tt.args, c.TLS, tt.enabled)
		}
	}
}

func TestHealthListenFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string // HealthListen
		err  string
	}{
		{nil, "", ""},
		{[]string{"-health-listen", "127.0.0.1:0"}, "127.0.0.1:0", ""},
		{[]string{"-listen", "127.0.0.1:8001", "-health-listen", ":8002"}, ":8002", ""},
		{[]string{"-health-listen", "8002"}, "", "-health-listen=\"8002\": want host:port"},
		{[]string{"-health-listen", "127.0.0.1:99999"}, "", "bad port"},
		{[]string{"-listen", "127.0.0.1:8001", "-health-listen", "127.0.0.1:8001"}, "", "the same address as -listen"},
	}
	for _, tt := range tests {
		c, err := parse(t, tt.args...)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want one naming %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil || c.HealthListen != tt.want {
			t.Errorf("%q: HealthListen %q, err %v; want %q", tt.args, c.HealthListen, err, tt.want)
		}
	}
}
