package rpclimit_test

import (
	"testing"
	"time"

	"switchyard.dev/libs/mesh/rpclimit"
)

func TestWithDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, want rpclimit.Limits
	}{
		{rpclimit.Limits{}, rpclimit.Limits{MaxMessageBytes: rpclimit.DefaultMaxMessageBytes, UnaryTimeout: rpclimit.DefaultUnaryTimeout}},
		{rpclimit.Limits{MaxMessageBytes: -1, UnaryTimeout: -time.Second}, rpclimit.Limits{MaxMessageBytes: rpclimit.DefaultMaxMessageBytes, UnaryTimeout: rpclimit.DefaultUnaryTimeout}},
		{rpclimit.Limits{MaxMessageBytes: 1024, UnaryTimeout: time.Second}, rpclimit.Limits{MaxMessageBytes: 1024, UnaryTimeout: time.Second}},
	}
	for _, tt := range tests {
		if got := tt.in.WithDefaults(); got != tt.want {
			t.Errorf("%+v.WithDefaults() = %+v, want %+v", tt.in, got, tt.want)
		}
	}
	// A tokenizer of a few tens of MiB (GetModelInfo) fits the default.
	if rpclimit.DefaultMaxMessageBytes < 48<<20 {
		t.Errorf("DefaultMaxMessageBytes = %d, too small for a GetModelInfo answer with a large tokenizer", rpclimit.DefaultMaxMessageBytes)
	}
}
