package llamacpp

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// A request that meets a keep-alive connection the server drops without
// answering is sent again on a new one, as cpp-httplib's resets need.
func TestClientResendsOnADroppedKeepAlive(t *testing.T) {
	var served atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/completion" && served.Add(1) == 1 {
			// Drop the connection the first /completion came on, as a
			// server closing a kept-alive socket under a request does.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.(*net.TCPConn).SetLinger(0)
				_ = conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"content\":\"x\",\"tokens\":[7],\"stop\":true,\"stop_type\":\"limit\"}\n\n"))
	}))
	srv.Start()
	t.Cleanup(srv.Close)
	c := &client{base: srv.URL, http: srv.Client()}
	if err := c.health(t.Context()); err != nil { // leaves a kept-alive connection
		t.Fatal(err)
	}
	st, err := c.complete(t.Context(), &completion{})
	if err != nil {
		t.Fatalf("completion on a dropped keep-alive connection: %v", err)
	}
	defer st.close()
	var ch chunk
	if err := st.next(&ch); err != nil {
		t.Fatal(err)
	}
	if !ch.Stop || served.Load() != 2 {
		t.Fatalf("got %+v after %d attempts; want the final event after 2", ch, served.Load())
	}
}
