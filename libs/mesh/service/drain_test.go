package service_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/discovery/filedisc"
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

// With -deregister-grace, shutdown first leaves discovery and then serves
// on, background work included, until the grace ends: a peer that still
// sends a request after the instance left discovery is served, not
// refused.
func TestDeregisterGrace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var work context.Context
	s := spec()
	s.Setup = func(ctx context.Context, rt *service.Runtime) error {
		work = ctx
		rt.Server.Handle("GET /work", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if work.Err() != nil {
				http.Error(w, "background work stopped", http.StatusServiceUnavailable)
				return
			}
			w.Write([]byte("served"))
		}))
		return nil
	}
	r := meshtest.Start(t, s, "-discovery", "file", "-discovery-dir", dir, "-deregister-grace", "3s")
	reg, err := filedisc.New(filedisc.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	listed := func() int {
		ins, err := reg.Instances(t.Context(), "planner")
		if err != nil {
			t.Fatal(err)
		}
		return len(ins)
	}
	deptest.Eventually(t, 10*time.Second, "registered", func() bool { return listed() == 1 })
	stopped := make(chan int, 1)
	go func() { stopped <- r.Stop(t) }()
	deptest.Eventually(t, 10*time.Second, "left discovery", func() bool { return listed() == 0 })
	res, err := http.Get(r.URL() + "/work")
	if err != nil {
		t.Fatalf("request during the grace: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(b) != "served" {
		t.Fatalf("request during the grace: %d %q, want it served", res.StatusCode, b)
	}
	if code := <-stopped; code != 0 {
		t.Fatalf("exit code %d:\n%s", code, r.Log())
	}
	if work.Err() == nil {
		t.Fatal("background work still running after shutdown")
	}
}
