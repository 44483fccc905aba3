package service_test

import (
	"net/http"
	"testing"

	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/meshtest"
)

// BenchmarkUnaryTLS measures one unary RPC (InfoService.GetInfo, through
// every interceptor) on a warm connection, h2c against mutual TLS: the
// difference is what TLS adds to each request once the handshake is paid
// (docs/security.md records a run).
func BenchmarkUnaryTLS(b *testing.B) {
	mesh := newPKI(b, "mesh CA")
	mesh.leaf("server")
	mesh.leaf("caller")
	for _, tc := range []struct {
		name string
		args []string
		hc   func() *http.Client
		url  func(addr string) string
	}{
		{"h2c", nil, client.NewHTTP, func(a string) string { return "http://" + a }},
		{"mtls", mesh.args("server"), func() *http.Client { return client.NewHTTPTLS(mesh.reloader("caller").DialTLS) },
			func(a string) string { return "https://" + a }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv := meshtest.Start(b, spec(), append([]string{"-discovery", "none"}, tc.args...)...)
			hc, url := tc.hc(), tc.url(srv.Addr)
			if err := getInfo(b.Context(), hc, url); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := getInfo(b.Context(), hc, url); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
