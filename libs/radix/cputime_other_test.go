//go:build !unix

package radix

import "time"

func cpuNow() (time.Duration, bool) { return 0, false }
