package client_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"connectrpc.com/connect"

	meshv1 "switchyard.dev/gen/switchyard/mesh/v1"
	"switchyard.dev/gen/switchyard/mesh/v1/meshv1connect"
	"switchyard.dev/libs/mesh/client"
)

// fakeClient records how it was built.
type fakeClient struct {
	hc   connect.HTTPClient
	url  string
	opts int
}

func TestCacheOneClientPerURL(t *testing.T) {
	t.Parallel()
	hc := &http.Client{}
	var built atomic.Int32
	c := client.NewCache(hc, func(hc connect.HTTPClient, url string, opts ...connect.ClientOption) *fakeClient {
		built.Add(1)
		return &fakeClient{hc: hc, url: url, opts: len(opts)}
	}, connect.WithGRPC(), connect.WithSendGzip())

	const urls, callers = 4, 16
	got := make([][urls]*fakeClient, callers)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range urls {
				got[g][i] = c.Get(fmt.Sprintf("http://w%d:1", i))
			}
		})
	}
	wg.Wait()
	if n := built.Load(); n != urls {
		t.Errorf("built %d clients for %d URLs", n, urls)
	}
	for i := range urls {
		want := fmt.Sprintf("http://w%d:1", i)
		for g := range callers {
			if got[g][i] != got[0][i] {
				t.Fatalf("caller %d got a different client for %s", g, want)
			}
		}
		if cl := got[0][i]; cl.url != want || cl.hc != hc || cl.opts != 2 {
			t.Errorf("client for %s built with url %q, hc %p (want %p), %d options (want 2)", want, cl.url, cl.hc, hc, cl.opts)
		}
	}
}

// TestCacheGeneratedClient uses the cache with a generated constructor, as
// services do, and calls through it.
func TestCacheGeneratedClient(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle(meshv1connect.NewInfoServiceHandler(meshv1connect.UnimplementedInfoServiceHandler{}))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetUnencryptedHTTP2(true) // NewHTTP speaks h2c only
	srv.Start()
	t.Cleanup(srv.Close)
	c := client.NewCache(client.NewHTTP(), meshv1connect.NewInfoServiceClient)
	_, err := c.Get(srv.URL).GetInfo(t.Context(), connect.NewRequest(&meshv1.GetInfoRequest{}))
	if connect.CodeOf(err) != connect.CodeUnimplemented {
		t.Fatalf("GetInfo: %v, want Unimplemented", err)
	}
}
