package engine

import (
	"context"
	"io"
	"sync"
)

// Stream delivers a request's outputs. The engine never blocks on a slow
// reader: outputs queue in the stream.
type Stream struct {
	id     string
	cancel func()

	mu     sync.Mutex
	queue  []Output
	closed bool // final output queued
	notify chan struct{}
}

func newStream(id string) *Stream {
	return &Stream{id: id, notify: make(chan struct{}, 1)}
}

// ID is the request id.
func (s *Stream) ID() string { return s.id }

// Recv returns the next output, blocking until there is one. After the
// final output (Finish set) it returns io.EOF.
func (s *Stream) Recv(ctx context.Context) (Output, error) {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			o := s.queue[0]
			s.queue[0] = Output{}
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return o, nil
		}
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return Output{}, io.EOF
		}
		select {
		case <-ctx.Done():
			return Output{}, ctx.Err()
		case <-s.notify:
		}
	}
}

// Cancel stops the request; its blocks are freed before the next step and
// the stream ends with FinishCancelled.
func (s *Stream) Cancel() { s.cancel() }

// push queues an output; outputs after the final one are dropped.
func (s *Stream) push(o Output) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.queue = append(s.queue, o)
	s.closed = o.Finish != ""
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}
