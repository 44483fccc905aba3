//go:build unix

package radix

import (
	"syscall"
	"time"
)

// cpuNow returns the CPU time this process has used. Benchmarks report it
// next to wall time because the shared build machines are often
// oversubscribed, which inflates wall time but not CPU time.
func cpuNow() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
