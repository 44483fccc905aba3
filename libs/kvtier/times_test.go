package kvtier

import (
	"testing"
	"time"
)

func TestTimes(t *testing.T) {
	t.Parallel()
	ts := Times{Host: 84 * time.Microsecond, External: 4660 * time.Microsecond}
	if s := ts.String(); s != "host=84000,external=4660000" {
		t.Fatalf("String = %q", s)
	}
	if got, err := ParseTimes(ts.String()); err != nil || got != ts {
		t.Fatalf("ParseTimes = %v, %v", got, err)
	}
	if got, err := ParseTimes(""); err != nil || got != (Times{}) {
		t.Fatalf("ParseTimes(\"\") = %v, %v", got, err)
	}
	for _, bad := range []string{"host", "host=", "host=0", "host=-5", "host=1.5", "host=01", "gpu=5", "host=1,host=2", ",", "host=1,"} {
		if _, err := ParseTimes(bad); err == nil {
			t.Errorf("ParseTimes(%q) passed", bad)
		}
	}
}

// What parses prints back the same.
func FuzzParseTimes(f *testing.F) {
	f.Add("host=84000,disk=350000")
	f.Add("device=1,external=9")
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := ParseTimes(s)
		if err != nil {
			return
		}
		again, err := ParseTimes(ts.String())
		if err != nil || again != ts {
			t.Fatalf("ParseTimes(%q) = %v; its String %q parses as %v, %v", s, ts, ts.String(), again, err)
		}
	})
}
