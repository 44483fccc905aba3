//go:build ucx && cgo

package ucx

import (
	"log/slog"
	"testing"

	"switchyard.dev/libs/nixl"
)

// TestEagerOnlyOverTCP: a connection forces eager WRITE messages (up to
// Config.EagerMax) only when UCX carries its active messages over tcp,
// which the backend reads from UCX's own description of the endpoint; a
// UCX whose description changed shows here as tcp read as "not tcp".
func TestEagerOnlyOverTCP(t *testing.T) {
	for _, tc := range []struct {
		name, tls string
		cfg       Config
		want      int
	}{
		{"tcp", "tcp", Config{}, defaultEagerMax},
		{"tcp, 16 KiB", "tcp", Config{EagerMax: 16 << 10}, 16 << 10},
		{"tcp, eager off", "tcp", Config{EagerMax: -1}, -1},
		{"tcp, 4 MiB taken as 1 MiB", "tcp", Config{EagerMax: 4 << 20}, 1 << 20},
		{"shared memory", "sm", Config{NoPeerErrHandling: true}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("UCX_TLS", tc.tls)
			backend := func(name string) nixl.Backend {
				env := nixl.Env{Agent: name, Logger: slog.New(slog.DiscardHandler), Notify: func(string, []byte) {}}
				b, err := New(tc.cfg)(env)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = b.Close() })
				return b
			}
			a, b := backend("a"), backend("b")
			c, err := a.Connect(nixl.PeerInfo{Name: "b", Address: b.Address()})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := c.(*conn).eagerMax; got != tc.want { // set by Connect, read-only after
				t.Errorf("eagerMax = %d, want %d", got, tc.want)
			}
		})
	}
}
