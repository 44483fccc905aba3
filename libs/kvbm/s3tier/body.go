package s3tier

import "io"

// blockBody is an object's body read in place: a block's header, then its
// data, as one seekable stream (the SDK seeks it to sign the payload and
// to retry). Encoding the block into one buffer instead cost an
// allocation and a copy of the block on every write.
type blockBody [2][]byte

func newBlockBody(hdr, data []byte) *io.SectionReader {
	b := blockBody{hdr, data}
	return io.NewSectionReader(b, 0, int64(len(hdr)+len(data)))
}

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
