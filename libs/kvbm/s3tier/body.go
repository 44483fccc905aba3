package s3tier

import (
	"errors"
	"io"
	"sync"
)

// blockBody is an object's body read in place: a block's header, then its
// data, as one seekable stream (the SDK seeks it to sign the payload and
// to retry). Encoding the block into one buffer instead cost an
// allocation and a copy of the block on every write.
type blockBody [2][]byte

// ReadAt reads the parts as if they were one.
func (b blockBody) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for _, part := range b {
		if off >= int64(len(part)) {
			off -= int64(len(part))
			continue
		}
		n += copy(p[n:], part[off:])
		off = 0
		if n == len(p) {
			return n, nil
		}
	}
	return n, io.EOF
}

// errSealed is a read of a PUT's body after its call returned.
var errSealed = errors.New("s3tier: request body read after its call ended")

// putBody is a PUT's body over the caller's block. The caller reuses the
// block's memory once Put returns (the engine's staging buffer), but
// net/http may still read a request body then: it writes it on a
// goroutine of its own, and a store that answers early (a 412) does so
// before reading it all. seal waits for a read in progress and fails
// every later one, so nothing reads the block after Put.
type putBody struct {
	mu sync.Mutex
	r  *io.SectionReader // nil once sealed
}

func newPutBody(hdr, data []byte) *putBody {
	return &putBody{r: io.NewSectionReader(blockBody{hdr, data}, 0, int64(len(hdr)+len(data)))}
}

// Read implements io.Reader.
func (b *putBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.r == nil {
		return 0, errSealed
	}
	return b.r.Read(p)
}

// Seek implements io.Seeker.
func (b *putBody) Seek(off int64, whence int) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.r == nil {
		return 0, errSealed
	}
	return b.r.Seek(off, whence)
}

func (b *putBody) seal() {
	b.mu.Lock()
	b.r = nil
	b.mu.Unlock()
}
