//go:build unix

package file

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/backend/internal/fanout"
)

// errEOF is a READ that reached the end of the file before its range did.
var errEOF = fmt.Errorf("%w: past the end of the file: %w", nixl.ErrOutOfRange, io.ErrUnexpectedEOF)

// op is one I/O: bufs, back to back in region's file from off.
type op struct {
	f      *file
	region nixl.RegionID
	off    int64
	n      int
	bufs   [][]byte
}

// Post implements nixl.StorageBackend.
func (b *Backend) Post(req *nixl.Request) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		req.Done(nixl.ErrClosed)
		return
	}
	ops, err := b.plan(req.Pairs)
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		if err == nil {
			err = b.run(req, ops)
		}
		req.Done(err)
	}()
}

// plan splits pairs into I/Os of at most MaxIO bytes and merges pieces
// that follow each other in one file into one vectored I/O. Caller holds
// b.mu.
func (b *Backend) plan(pairs []nixl.Pair) ([]op, error) {
	var ops []op
	for _, p := range pairs {
		f := b.files[p.Remote.Region]
		if f == nil {
			return nil, fmt.Errorf("file: %w: %d", nixl.ErrUnknownRegion, p.Remote.Region)
		}
		for done := 0; done < len(p.Local); {
			n := min(b.cfg.MaxIO, len(p.Local)-done)
			buf, off := p.Local[done:done+n], int64(p.Remote.Offset)+int64(done)
			done += n
			if k := len(ops) - 1; k >= 0 && ops[k].f == f && ops[k].off+int64(ops[k].n) == off &&
				ops[k].n+n <= b.cfg.MaxIO && len(ops[k].bufs) < maxIOV {
				ops[k].bufs = append(ops[k].bufs, buf)
				ops[k].n += n
				continue
			}
			ops = append(ops, op{f: f, region: p.Remote.Region, off: off, n: n, bufs: [][]byte{buf}})
		}
	}
	return ops, nil
}

func (b *Backend) run(req *nixl.Request, ops []op) error {
	halt := fanout.Halt(b.stop, req.Canceled)
	return fanout.Run(len(ops), b.cfg.Depth, halt, func(i int) error {
		o := &ops[i]
		if err := o.do(req.Op == nixl.Write); err != nil {
			return fmt.Errorf("file: %v region %d [%d,+%d): %w", req.Op, o.region, o.off, o.n, err)
		}
		return nil
	})
}

// do runs o on the direct descriptor if o is aligned and there is one,
// else on the buffered one. A direct I/O the kernel refuses as invalid
// (an alignment stricter than ours) is done again buffered.
func (o *op) do(write bool) error {
	fd := o.fd()
	err := rw(fd, slices.Clone(o.bufs), o.off, write)
	if errors.Is(err, unix.EINVAL) && fd == o.f.direct && o.f.buffered >= 0 {
		err = rw(o.f.buffered, slices.Clone(o.bufs), o.off, write)
	}
	return err
}

func (o *op) fd() int {
	if o.f.direct >= 0 && (o.f.buffered < 0 || o.aligned()) {
		return o.f.direct
	}
	return o.f.buffered
}

func (o *op) aligned() bool {
	if o.off%align != 0 {
		return false
	}
	for _, b := range o.bufs {
		if len(b)%align != 0 || uintptr(unsafe.Pointer(unsafe.SliceData(b)))%align != 0 {
			return false
		}
	}
	return true
}

// rw reads or writes all of bufs at off, resuming after short transfers;
// it consumes bufs.
func rw(fd int, bufs [][]byte, off int64, write bool) error {
	for len(bufs) > 0 {
		n, err := pio(fd, bufs, off, write)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return err
		case n == 0 && write:
			return io.ErrShortWrite
		case n == 0:
			return errEOF
		}
		off += int64(n)
		bufs = advance(bufs, n)
	}
	return nil
}

// advance drops the first n bytes of bufs, in place.
func advance(bufs [][]byte, n int) [][]byte {
	for len(bufs) > 0 && n >= len(bufs[0]) {
		n -= len(bufs[0])
		bufs = bufs[1:]
	}
	if n > 0 {
		bufs[0] = bufs[0][n:]
	}
	return bufs
}
