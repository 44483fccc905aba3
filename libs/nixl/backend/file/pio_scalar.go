//go:build unix && !linux && !darwin && !openbsd

package file

import "golang.org/x/sys/unix"

// pio is one positional call on the first buffer: x/sys has no
// preadv/pwritev here, and rw resumes with the next.
func pio(fd int, bufs [][]byte, off int64, write bool) (int, error) {
	if write {
		return unix.Pwrite(fd, bufs[0], off)
	}
	return unix.Pread(fd, bufs[0], off)
}
