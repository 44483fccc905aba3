package file

import (
	"log/slog"
	"strconv"

	"golang.org/x/sys/unix"
)

// withDirect gives f its descriptor in the other mode: the file reopened
// through /proc/self/fd (the same inode, also once unlinked) with O_DIRECT
// if want is set, or without it if the caller's descriptor has it, so
// unaligned I/Os still work. A filesystem that refuses O_DIRECT (tmpfs)
// leaves f buffered only.
func withDirect(f *file, flags int, want bool, log *slog.Logger) {
	if flags&unix.O_DIRECT != 0 {
		f.direct, f.buffered = f.buffered, reopen(f.buffered, flags&^unix.O_DIRECT, log)
		return
	}
	if want {
		f.direct = reopen(f.buffered, flags|unix.O_DIRECT, log)
	}
}

func reopen(fd, flags int, log *slog.Logger) int {
	nfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), flags&(unix.O_ACCMODE|unix.O_DIRECT)|unix.O_CLOEXEC, 0)
	if err != nil {
		log.Debug("file: no descriptor in the other mode; every I/O takes the one given", "o_direct", flags&unix.O_DIRECT != 0, "err", err)
		return -1
	}
	return nfd
}
