package obj

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// errSealed is a read of a PUT's payload after its call returned.
var errSealed = errors.New("obj: request body read after its call ended")

// body is a PUT's payload, read straight from the agent's memory. The
// memory is the caller's again once the transfer's Done is called, but
// net/http may still read a request body after the call returned: it
// writes the body on a goroutine of its own, and a store that answers
// early (a 412) does so before it has read it all. seal waits for a read
// in progress and makes every later one fail, so nothing reads the memory
// after Done.
type body struct {
	mu sync.Mutex
	r  *bytes.Reader // nil once sealed
}

func newBody(b []byte) *body { return &body{r: bytes.NewReader(b)} }

// Read implements io.Reader.
func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.r == nil {
		return 0, errSealed
	}
	return b.r.Read(p)
}

// Seek implements io.Seeker: the SDK hashes the payload to sign it, then
// rewinds, and rewinds again to retry.
func (b *body) Seek(off int64, whence int) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.r == nil {
		return 0, errSealed
	}
	return b.r.Seek(off, whence)
}

func (b *body) seal() {
	b.mu.Lock()
	b.r = nil
	b.mu.Unlock()
}

var _ io.ReadSeeker = (*body)(nil)
