package service_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard.dev/gen/switchyard/mesh/v1/meshv1connect"
	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/deptest"
	"switchyard.dev/libs/mesh/meshtest"
	"switchyard.dev/libs/mesh/service"
)

// With mutual TLS on and -health-listen, an orchestrator without a mesh
// certificate checks /live and /ready over plain HTTP on the health
// port, while the main port still refuses it; the health port serves
// nothing else, and reports draining as the main listener does.
func TestHealthListenerWithTLS(t *testing.T) {
	t.Parallel()
	mesh := newPKI(t, "mesh CA")
	mesh.leaf("server")
	mesh.leaf("caller")
	health := make(chan string, 1)
	s := spec()
	s.Setup = func(_ context.Context, rt *service.Runtime) error {
		health <- rt.Server.HealthAddr().String()
		return nil
	}
	srv := meshtest.Start(t, s, append(mesh.args("server"), "-discovery", "file", "-discovery-dir", t.TempDir(),
		"-health-listen", "127.0.0.1:0", "-deregister-grace", "5s")...)
	hurl := "http://" + <-health

	for _, path := range []string{"/live", "/ready", "/health"} {
		if code, body := get(t, hurl+path); code != http.StatusOK || (path != "/live" && !strings.Contains(body, `"status":"ok"`)) {
			t.Errorf("GET %s on the health port without a certificate: %d %s, want 200", path, code, body)
		}
	}
	for _, path := range []string{"/metrics", "/" + meshv1connect.InfoServiceName + "/GetInfo", "/debug/pprof/"} {
		if code, _ := get(t, hurl+path); code != http.StatusNotFound {
			t.Errorf("GET %s on the health port: %d, want 404 (liveness and readiness only)", path, code)
		}
	}
	if res, err := http.Post(hurl+"/"+meshv1connect.InfoServiceName+"/GetInfo", "application/json", strings.NewReader("{}")); err != nil {
		t.Fatal(err)
	} else if res.Body.Close(); res.StatusCode != http.StatusNotFound && res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("an RPC on the health port: %s, want it not served", res.Status)
	}

	roots := x509.NewCertPool()
	roots.AddCert(mesh.ca.Cert)
	noCert := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	if res, err := noCert.Get("https://" + srv.Addr + "/ready"); err == nil {
		res.Body.Close()
		t.Errorf("the main port answered a caller without a certificate: %s", res.Status)
	}
	if err := getInfo(t.Context(), client.NewHTTPTLS(mesh.reloader("caller").DialTLS), "https://"+srv.Addr); err != nil {
		t.Fatalf("a mesh caller on the main port: %v", err)
	}

	stopped := make(chan int, 1)
	go func() { stopped <- srv.Stop(t) }()
	deptest.Eventually(t, 10*time.Second, "the health port reporting draining", func() bool {
		res, err := http.Get(hurl + "/ready")
		if err != nil {
			t.Fatalf("the health port closed before the drain ended: %v", err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode == http.StatusOK {
			time.Sleep(10 * time.Millisecond)
			return false
		}
		return res.StatusCode == http.StatusServiceUnavailable && strings.Contains(string(b), "draining")
	})
	if code := <-stopped; code != 0 {
		t.Fatalf("exit code %d:\n%s", code, srv.Log())
	}
	if _, err := http.Get(hurl + "/live"); err == nil {
		t.Error("the health port still serves after shutdown")
	}
}

// Without -health-listen there is no second listener.
func TestNoHealthListenerByDefault(t *testing.T) {
	t.Parallel()
	var addr any = "unset"
	s := spec()
	s.Setup = func(_ context.Context, rt *service.Runtime) error {
		addr = rt.Server.HealthAddr()
		return nil
	}
	meshtest.Start(t, s, "-discovery", "none")
	if addr != nil {
		t.Fatalf("HealthAddr = %v, want nil", addr)
	}
}
