package discovery_test

import (
	"testing"

	"switchyard.dev/libs/mesh/discovery"
)

func TestInstanceURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		meta map[string]string
		want string
	}{
		{nil, "http://127.0.0.1:9000"},
		{map[string]string{discovery.MetaTLS: "1"}, "https://127.0.0.1:9000"},
		{map[string]string{discovery.MetaTLS: "0"}, "http://127.0.0.1:9000"},
	}
	for _, tt := range tests {
		if got := (discovery.Instance{Address: "127.0.0.1:9000", Meta: tt.meta}).URL(); got != tt.want {
			t.Errorf("meta %v: URL %q, want %q", tt.meta, got, tt.want)
		}
	}
}
