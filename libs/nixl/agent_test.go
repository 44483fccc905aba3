package nixl_test

import (
	"testing"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/arena"
	"switchyard.dev/libs/nixl/backend/local"
	"switchyard.dev/libs/nixl/backend/tcp"
)

// TestBackendChoice: the first backend in preference order that both
// peers advertise wins.
func TestBackendChoice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		pref []string
		want string
	}{
		{"default prefers tcp over local", nil, tcp.Name},
		{"explicit local first", []string{"local", "tcp"}, local.Name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := local.NewRegistry()
			mk := func(name string) *nixl.Agent {
				a, err := nixl.NewAgent(nixl.Config{Name: name, Preference: tc.pref,
					Backends: []nixl.BackendFactory{local.New(reg), tcp.New(tcp.Config{})}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = a.Close() })
				return a
			}
			a, b := mk("a"), mk("b")
			ar, err := arena.Map(4096)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ar.Close() })
			if _, err := b.RegisterMemory(ar.Bytes()); err != nil {
				t.Fatal(err)
			}
			md, err := b.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.LoadRemoteMetadata(md); err != nil {
				t.Fatal(err)
			}
			x, err := a.Post(nixl.XferRequest{Op: nixl.Write, Peer: "b", Notif: []byte("hi")})
			if err != nil {
				t.Fatal(err)
			}
			if err := x.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := a.Backend("b"); got != tc.want {
				t.Fatalf("backend = %q, want %q", got, tc.want)
			}
		})
	}
}
