package worker

import (
	"context"
	"testing"

	"switchyard.dev/libs/mesh/client"
	"switchyard.dev/libs/mesh/telemetry"
)

// TestPrefillDialer checks that the prefill dialer keeps one client per
// worker whether its address comes with a scheme or without.
func TestPrefillDialer(t *testing.T) {
	t.Parallel()
	tel, err := telemetry.New(t.Context(), telemetry.Config{Service: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	dial, err := prefillDialer(tel, client.NewHTTP())
	if err != nil {
		t.Fatal(err)
	}
	a, b := dial("127.0.0.1:7001"), dial("http://127.0.0.1:7001")
	if a == nil || a != b {
		t.Errorf("host:port and http://host:port gave different clients (%p, %p)", a, b)
	}
	if c := dial("127.0.0.1:7002"); c == a {
		t.Error("two workers share a client")
	}
}
