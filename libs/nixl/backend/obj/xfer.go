package obj

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"switchyard.dev/libs/nixl"
	"switchyard.dev/libs/nixl/backend/internal/fanout"
)

// call is one GET of a range, scattered into bufs in order, or one PUT
// of an object from bufs[0].
type call struct {
	obj  object
	off  int
	bufs [][]byte
	n    int // bytes in bufs
}

// Post implements nixl.StorageBackend.
func (b *Backend) Post(req *nixl.Request) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		req.Done(nixl.ErrClosed)
		return
	}
	calls, err := b.plan(req)
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		if err == nil {
			err = b.run(req, calls)
		}
		req.Done(err)
	}()
}

// plan checks every WRITE descriptor before anything is sent and splits
// READs into parts. Caller holds b.mu.
func (b *Backend) plan(req *nixl.Request) ([]call, error) {
	var calls []call
	written := map[nixl.RegionID]bool{}
	for i, p := range req.Pairs {
		o, ok := b.objs[p.Remote.Region]
		if !ok {
			return nil, fmt.Errorf("obj: %w: %d", nixl.ErrUnknownRegion, p.Remote.Region)
		}
		if req.Op == nixl.Write {
			switch {
			case written[p.Remote.Region]:
				return nil, fmt.Errorf("%w: descriptor %d: a second WRITE of %q in one transfer", ErrPartialWrite, i, o.key)
			case p.Remote.Offset != 0 || len(p.Local) != o.size:
				return nil, fmt.Errorf("%w: descriptor %d: [%d,+%d) of %q, which has %d bytes",
					ErrPartialWrite, i, p.Remote.Offset, len(p.Local), o.key, o.size)
			}
			written[p.Remote.Region] = true
			calls = append(calls, call{obj: o, bufs: [][]byte{p.Local}, n: len(p.Local)})
			continue
		}
		for done := 0; done < len(p.Local); done += b.cfg.PartSize {
			n := min(b.cfg.PartSize, len(p.Local)-done)
			off, buf := int(p.Remote.Offset)+done, p.Local[done:done+n]
			// A range that continues the previous call's in the same object
			// joins it: one GET scattered into both buffers (a block's
			// header into one, its data into another) costs one round trip.
			if k := len(calls) - 1; k >= 0 && calls[k].obj.key == o.key && calls[k].off+calls[k].n == off && calls[k].n+n <= b.cfg.PartSize {
				calls[k].bufs = append(calls[k].bufs, buf)
				calls[k].n += n
				continue
			}
			calls = append(calls, call{obj: o, off: off, bufs: [][]byte{buf}, n: n})
		}
	}
	return calls, nil
}

func (b *Backend) run(req *nixl.Request, calls []call) error {
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	go func() { // a cancel aborts the calls in flight, not only the next
		select {
		case <-req.Canceled:
			cancel()
		case <-ctx.Done():
		}
	}()
	halt := fanout.Halt(b.ctx.Done(), req.Canceled)
	return fanout.Run(len(calls), b.cfg.Depth, halt, func(i int) error {
		c := &calls[i]
		var err error
		if req.Op == nixl.Write {
			err = b.put(ctx, c)
		} else {
			err = b.get(ctx, c)
		}
		if err != nil && ctx.Err() != nil {
			if h := halt(); h != nil {
				return h // the call was aborted, not refused
			}
		}
		return err
	})
}

func (b *Backend) get(ctx context.Context, c *call) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	rng := "bytes=" + strconv.Itoa(c.off) + "-" + strconv.Itoa(c.off+c.n-1)
	out, err := b.client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(b.cfg.Bucket), Key: aws.String(c.obj.key), Range: aws.String(rng)})
	if err != nil {
		return fmt.Errorf("obj: GET %q %s: %w", c.obj.key, rng, classify(err))
	}
	defer out.Body.Close()
	if n := aws.ToInt64(out.ContentLength); out.ContentLength != nil && n != int64(c.n) {
		return fmt.Errorf("obj: GET %q %s: %d bytes: %w", c.obj.key, rng, n, errShort)
	}
	for _, buf := range c.bufs {
		if _, err := io.ReadFull(out.Body, buf); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
				err = errShort
			}
			return fmt.Errorf("obj: GET %q %s: %w", c.obj.key, rng, err)
		}
	}
	return nil
}

func (b *Backend) put(ctx context.Context, c *call) error {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	body := newBody(c.bufs[0])
	defer body.seal()
	in := &s3.PutObjectInput{Bucket: aws.String(b.cfg.Bucket), Key: aws.String(c.obj.key),
		Body: body, ContentLength: aws.Int64(int64(c.n))}
	if b.cfg.NoOverwrite {
		in.IfNoneMatch = aws.String("*")
	}
	if _, err := b.client.PutObject(ctx, in); err != nil {
		return fmt.Errorf("obj: PUT %q: %w", c.obj.key, classify(err))
	}
	return nil
}

// errShort is a range the object does not hold all of.
var errShort = fmt.Errorf("%w: the object ends before the range: %w", nixl.ErrOutOfRange, io.ErrUnexpectedEOF)

// classify wraps the store's answers that a caller acts on in this
// package's and nixl's errors.
func classify(err error) error {
	var status interface{ HTTPStatusCode() int }
	var api smithy.APIError
	code := ""
	if errors.As(err, &api) {
		code = api.ErrorCode()
	}
	if !errors.As(err, &status) {
		return err
	}
	switch {
	case status.HTTPStatusCode() == http.StatusPreconditionFailed:
		return fmt.Errorf("%w: %w", ErrExists, err)
	case status.HTTPStatusCode() == http.StatusNotFound && code != "NoSuchBucket":
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case status.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%w: %w", nixl.ErrOutOfRange, err)
	}
	return err
}
