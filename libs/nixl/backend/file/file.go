//go:build unix

// Package file is the nixl storage backend for POSIX files, modelled on
// NIXL's POSIX plugin: a file registered as a FILE_SEG region (by its
// descriptor, which the backend duplicates) takes READs into and WRITEs
// from the agent's own memory, a descriptor's offset being the file
// offset. KV blocks go to and from local disk through the same descriptor
// lists as every other transfer.
//
// A transfer is split into I/Os of at most Config.MaxIO bytes, pieces
// adjacent in the file merged into one vectored call (preadv/pwritev, so a
// run of scattered memory blocks stored back to back costs one system
// call, not one a block), and Config.Depth of them are kept in flight.
// Every access is positional, so the file's offset is never used and a
// transfer never touches bytes outside its descriptors. A READ past the
// end of the file fails with nixl.ErrOutOfRange (and io.ErrUnexpectedEOF),
// so a file truncated under a registration is an error, never a fault.
//
// With Config.Direct, I/Os whose buffer, file offset and length are
// aligned to 4096 bytes use a second descriptor opened with O_DIRECT
// (Linux; bypassing the page cache), where the filesystem allows it
// (tmpfs refused it before Linux 6.6); every other I/O, and every I/O
// where it does not, uses the buffered descriptor. GPU-direct storage (cuFile/GDS: file I/O
// straight into GPU memory) needs a GPU and NVIDIA's driver stack, absent
// here, and is not implemented: the backend moves host memory only.
package file

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"golang.org/x/sys/unix"

	"switchyard.dev/libs/nixl"
)

// Name is the backend's identifier.
const Name = "file"

// align is the O_DIRECT alignment of buffers, offsets and lengths: the
// largest logical block size of common devices, so it satisfies them all.
const align = 4096

// maxIOV bounds the buffers of one vectored call (Linux's IOV_MAX).
const maxIOV = 1024

// Config tunes the backend; zero values take defaults.
type Config struct {
	// Depth is how many I/Os a transfer keeps in flight (default 4).
	Depth int
	// MaxIO bounds the bytes of one I/O (default 1 MiB; rounded down to a
	// multiple of 4096), so a large descriptor is read by Depth calls at
	// once and a cancel is seen between them.
	MaxIO int
	// Direct adds an O_DIRECT descriptor for aligned I/Os (see the package
	// comment).
	Direct bool
}

func (c Config) withDefaults() Config {
	if c.Depth <= 0 {
		c.Depth = 4
	}
	c.MaxIO -= c.MaxIO % align
	if c.MaxIO <= 0 {
		c.MaxIO = 1 << 20
	}
	return c
}

// New returns a factory for file backends.
func New(cfg Config) nixl.StorageFactory {
	cfg = cfg.withDefaults()
	return func(env nixl.Env) (nixl.StorageBackend, error) {
		log := env.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		return &Backend{cfg: cfg, log: log, files: map[nixl.RegionID]*file{}, stop: make(chan struct{})}, nil
	}
}

// Backend is one agent's file backend.
type Backend struct {
	cfg  Config
	log  *slog.Logger
	stop chan struct{} // closed by Close
	wg   sync.WaitGroup

	mu     sync.Mutex
	closed bool
	files  map[nixl.RegionID]*file
}

// file is a registered file's descriptors: the duplicate of the caller's
// and, with Config.Direct, one opened in the other mode (-1 if none).
type file struct {
	buffered, direct int
}

func (f *file) close() error {
	var errs []error
	for _, fd := range []int{f.buffered, f.direct} {
		if fd >= 0 {
			errs = append(errs, unix.Close(fd))
		}
	}
	return errors.Join(errs...)
}

// Name implements nixl.StorageBackend.
func (b *Backend) Name() string { return Name }

// Kind implements nixl.StorageBackend.
func (b *Backend) Kind() nixl.SegKind { return nixl.FileSeg }

// RegisterStorage implements nixl.StorageBackend: seg must be a
// nixl.FileSegment, on a file not opened with O_APPEND (Linux appends
// every pwrite to such a file whatever its offset).
func (b *Backend) RegisterStorage(id nixl.RegionID, seg nixl.Segment) error {
	fs, ok := seg.(nixl.FileSegment)
	if !ok || fs.File == nil {
		return fmt.Errorf("file: %T is not a nixl.FileSegment with a file", seg)
	}
	f, err := b.open(fs)
	if err != nil {
		return fmt.Errorf("file: %s: %w", fs.File.Name(), err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.Join(nixl.ErrClosed, f.close())
	}
	b.files[id] = f
	return nil
}

// open duplicates fs's descriptor and, with Config.Direct, opens the
// other mode of the file.
func (b *Backend) open(fs nixl.FileSegment) (*file, error) {
	rc, err := fs.File.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(orig uintptr) { fd, derr = unix.FcntlInt(orig, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, fmt.Errorf("duplicate descriptor: %w", derr)
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil && flags&unix.O_APPEND != 0 {
		err = errors.New("opened with O_APPEND, which positional writes ignore")
	}
	if err != nil {
		_ = unix.Close(fd)
		return nil, err
	}
	f := &file{buffered: fd, direct: -1}
	withDirect(f, flags, b.cfg.Direct, b.log.With("file", fs.File.Name()))
	return f, nil
}

// DeregisterStorage implements nixl.StorageBackend: it closes the
// backend's descriptors of the file.
func (b *Backend) DeregisterStorage(id nixl.RegionID) error {
	b.mu.Lock()
	f := b.files[id]
	delete(b.files, id)
	b.mu.Unlock()
	if f == nil {
		return nil // already released by Close
	}
	return f.close()
}

// Close fails posted transfers with nixl.ErrClosed once their I/Os in
// flight have returned, then closes every descriptor.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.stop)
	b.mu.Unlock()
	b.wg.Wait()
	b.mu.Lock()
	files := b.files
	b.files = map[nixl.RegionID]*file{}
	b.mu.Unlock()
	var errs []error
	for _, f := range files {
		errs = append(errs, f.close())
	}
	return errors.Join(errs...)
}
