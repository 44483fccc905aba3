package deptest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// fatalRecorder stands in for the test Eventually fails.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestEventually(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		holdsAt time.Duration // cond holds from then on; < 0: never
		wantMsg string
	}{
		{"at once", 0, ""},
		{"later", 3 * time.Second, ""},
		{"never", -1, "timed out after 5s waiting for the thing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				cond := func() bool { return tt.holdsAt >= 0 && time.Since(start) >= tt.holdsAt }
				f := &fatalRecorder{TB: t}
				done := make(chan struct{})
				go func() {
					defer close(done)
					Eventually(f, 5*time.Second, "the thing", cond)
				}()
				<-done
				if !strings.Contains(f.msg, tt.wantMsg) || (tt.wantMsg == "") != (f.msg == "") {
					t.Fatalf("failure %q, want %q", f.msg, tt.wantMsg)
				}
			})
		})
	}
}
