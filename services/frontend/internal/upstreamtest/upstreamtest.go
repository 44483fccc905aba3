// Package upstreamtest serves in-process fakes of the RouterService and the
// WorkerService over real h2c HTTP, for the frontend's tests and
// benchmarks. The fakes are deterministic: a worker recites a fixed script
// by sequence position, so a generation that migrates to another worker
// mid-stream produces exactly the text of an undisturbed one.
package upstreamtest

import (
	"net"
	"net/http"
	"testing"
)

// Script is what fake workers recite: the token at sequence position p is
// the byte Script[p % len(Script)] of the byte tokenizer. It has multi-byte
// code points so held-back bytes cross message boundaries.
const Script = "Once upon a time, a little fox named Ünal found a shiny ✓ stone. He smiled. The end. "

// VocabSize of the fake model (byte tokenizer: 256 bytes + 3 specials).
const VocabSize = 300

// serve runs h on a loopback h2c server until the test ends and returns its
// base URL.
func serve(tb testing.TB, h http.Handler) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("upstreamtest: listen: %v", err)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: h, Protocols: p, HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 1024}}
	go func() { _ = hs.Serve(ln) }()
	tb.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String()
}
