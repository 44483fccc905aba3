package s3tier

import (
	"errors"
	"testing"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	good := Key{Namespace: Namespace("org/llama 3"), BlockSize: 16, BlockBytes: 2 << 20, Hash: 0xdeadbeef}
	if got, err := ParseKey(good.String()); err != nil || got != good {
		t.Fatalf("ParseKey(%q) = %+v, %v; want %+v", good.String(), got, err, good)
	}
	for _, bad := range []string{
		"",
		"other/v1/m/16t-64B/ff",
		Root + "m/16t-64B",
		Root + "m/16t-64B/ff/x",
		Root + "/16t-64B/ff",
		Root + "m/16x-64B/ff",
		Root + "m/16t-64/ff",
		Root + "m/016t-64B/ff",
		Root + "m/0t-64B/ff",
		Root + "m/16t-64B/FF",
		Root + "m/16t-64B/0ff",
		Root + "m/16t-64B/zz",
		Root + "m/16t-64B/10000000000000000",
		Root + "m m/16t-64B/ff",
	} {
		if k, err := ParseKey(bad); !errors.Is(err, ErrNotBlockKey) {
			t.Errorf("ParseKey(%q) = %+v, %v; want ErrNotBlockKey", bad, k, err)
		}
	}
}

// A key that parses is the one spelling of its block: printing it again
// gives the same key.
func FuzzParseKey(f *testing.F) {
	f.Add(Key{Namespace: "m", BlockSize: 16, BlockBytes: 64, Hash: 255}.String())
	f.Add(Root + "m/16t-64B/ff")
	f.Add(Root + "a%2Fb/1t-1B/0")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseKey(s)
		if err != nil {
			return
		}
		if k.String() != s {
			t.Fatalf("ParseKey(%q) = %+v, which prints as %q", s, k, k.String())
		}
	})
}
