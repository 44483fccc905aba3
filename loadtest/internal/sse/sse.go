// Package sse reads a text/event-stream body (the framing OpenAI-compatible
// servers use for streamed completions) one event at a time.
//
// The reader follows the WHATWG event-stream rules that matter to a client:
// "data:" lines accumulate (joined by "\n") until a blank line dispatches the
// event, "event:" names it, lines starting with ":" are comments, a CR before
// the LF is dropped, and a final event without its blank line is still
// delivered at end of stream. It is built for a hot loop: a steady stream
// allocates nothing per event once the buffers have grown.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes bounds a single line so a misbehaving server cannot make the
// client buffer without limit.
const MaxLineBytes = 16 << 20

// ErrLineTooLong is returned for a line longer than MaxLineBytes.
var ErrLineTooLong = errors.New("sse: line too long")

// Event is one dispatched event. Its slices are only valid until the next
// call to Next.
type Event struct {
	// Type is the "event:" field, empty for the default "message" type.
	Type []byte
	// Data is the concatenated "data:" lines.
	Data []byte
}

// Reader reads events from an event stream.
type Reader struct {
	br      *bufio.Reader
	typ     []byte
	data    []byte
	hasData bool
	long    []byte
	done    bool
	maxLine int
}

// NewReader returns a Reader over r.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 32<<10), maxLine: MaxLineBytes}
}

// Next returns the next event, or io.EOF once the stream has ended.
func (r *Reader) Next() (Event, error) {
	r.typ, r.data, r.hasData = r.typ[:0], r.data[:0], false
	for !r.done {
		line, err := r.readLine()
		if err != nil && !errors.Is(err, io.EOF) {
			return Event{}, err
		}
		if errors.Is(err, io.EOF) {
			r.done = true
			if len(line) == 0 {
				break
			}
		}
		if len(line) == 0 {
			if r.hasData {
				return Event{Type: r.typ, Data: r.data}, nil
			}
			r.typ = r.typ[:0]
			continue
		}
		r.field(line)
	}
	if r.hasData {
		r.hasData = false
		return Event{Type: r.typ, Data: r.data}, nil
	}
	return Event{}, io.EOF
}

func (r *Reader) field(line []byte) {
	if line[0] == ':' {
		return
	}
	name, value, found := bytes.Cut(line, []byte{':'})
	if found && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		if r.hasData {
			r.data = append(r.data, '\n')
		}
		r.data = append(r.data, value...)
		r.hasData = true
	case "event":
		r.typ = append(r.typ[:0], value...)
	}
}

// readLine returns one line without its terminator. The result aliases the
// bufio buffer (or r.long) and is valid until the next read.
func (r *Reader) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		r.long = append(r.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(r.long) > r.maxLine {
				return nil, fmt.Errorf("%w (over %d bytes)", ErrLineTooLong, r.maxLine)
			}
			line, err = r.br.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("sse: read: %w", err)
	}
	line = bytes.TrimSuffix(line, []byte{'\n'})
	line = bytes.TrimSuffix(line, []byte{'\r'})
	return line, err
}
