//go:build linux || darwin || openbsd

package file

import "golang.org/x/sys/unix"

// pio is one positional vectored call.
func pio(fd int, bufs [][]byte, off int64, write bool) (int, error) {
	if write {
		return unix.Pwritev(fd, bufs, off)
	}
	return unix.Preadv(fd, bufs, off)
}
