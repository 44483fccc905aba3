package app

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestFlagsValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string // error substring; "" means valid
	}{
		{nil, ""},
		{[]string{"-prefix-pull-weight", "0"}, ""},
		{[]string{"-mode", "fastest"}, `-mode="fastest"`},
		{[]string{"-own-prefill-weight", "0.5"}, "-own-prefill-weight"},
		{[]string{"-temperature", "-1"}, "must not be negative"},
		{[]string{"-prefill-load-scale", "-1"}, "must not be negative"},
		{[]string{"-prefix-pull-weight", "-0.5"}, "must not be negative"},
		{[]string{"-block-size", "0"}, "-block-size=0"},
		{[]string{"-approx", "some"}, `-approx="some"`},
		{[]string{"-load-ttl", "0s"}, "must be positive"},
		{[]string{"-redis-addr", "nohost"}, `-redis-addr="nohost"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var f flags
			fs := flag.NewFlagSet("router", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.register(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := f.validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// The router no longer reads engine sockets itself; an old command line
// fails with the way forward rather than an unknown-flag error.
func TestVLLMEndpointRemoved(t *testing.T) {
	t.Parallel()
	var f flags
	fs := flag.NewFlagSet("router", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs)
	err := fs.Parse([]string{"-vllm-endpoint", "w1=tcp://10.0.0.5:5557"})
	if err == nil || !strings.Contains(err.Error(), "-engine vllm|sglang") {
		t.Fatalf("Parse = %v; want the flag refused with the worker's -engine", err)
	}
}
