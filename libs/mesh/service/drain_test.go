package service_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/meshtest"
	"switchyard.dev/libs/mesh/service"
)

// On shutdown an in-flight request finishes (within the drain timeout),
// while /ready already reports draining.
func TestShutdownDrainsInFlight(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	release := make(chan struct{})
	s := spec()
	s.Setup = func(ctx context.Context, rt *service.Runtime) error {
		rt.Server.Handle("GET /slow", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release
			w.Write([]byte("finished"))
		}))
		return nil
	}
	r := meshtest.Start(t, s, "-discovery", "none", "-drain-timeout", "30s")
	got := make(chan string, 1)
	go func() {
		res, err := http.Get(r.URL() + "/slow")
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		got <- string(b)
	}()
	<-entered
	stopped := make(chan int, 1)
	go func() { stopped <- r.Stop(t) }()
	// New connections are refused once shutdown began; wait for that.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := http.Get(r.URL() + "/ready"); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case code := <-stopped:
		t.Fatalf("stopped (code %d) while a request was in flight", code)
	default:
	}
	close(release)
	if body := <-got; body != "finished" {
		t.Fatalf("in-flight request got %q; want it to finish", body)
	}
	if code := <-stopped; code != 0 {
		t.Fatalf("exit code %d:\n%s", code, r.Log())
	}
}
