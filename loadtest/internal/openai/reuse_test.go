package openai

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"switchyard.dev/loadtest/internal/metrics"
)

// Sequential streams reuse one connection. The server (like the Switchyard
// frontend) flushes "data: [DONE]" and ends the chunked body a moment
// later; closing the body before that end discarded the connection, so
// every request paid a new TCP handshake inside its TTFT.
func TestStreamsReuseConnection(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl := w.(http.Flusher)
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\" w%d\"}]}\n\n", i)
			fl.Flush()
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		fl.Flush()
		time.Sleep(2 * time.Millisecond) // the handler's bookkeeping after the last flush
	})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c, err := New(Config{BaseURL: srv.URL, Model: "m"}, NewHTTPClient(16, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	for range n {
		var rec metrics.Record
		c.Stream(context.Background(), Request{Tokens: []int{1, 2, 3}, MaxTokens: 3}, &rec)
		if rec.Err != "" {
			t.Fatal(rec.Err)
		}
	}
	if got := conns.Load(); got != 1 {
		t.Fatalf("%d sequential requests opened %d connections, want 1", n, got)
	}
}
