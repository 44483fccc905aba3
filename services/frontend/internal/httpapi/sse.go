package httpapi

import (
	"net/http"
)

// sseWriter writes server-sent events. Events are encoded into one buffer
// (add) and go out together, one Write and one Flush, when the caller
// has nothing more ready (flush): a stream that keeps up sends each
// event as it comes, and one that fell behind catches up in one write
// rather than a syscall per token.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	buf     []byte
	started bool
}

func newSSE(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

func (s *sseWriter) begin() {
	s.started = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// add appends a format's body as events: nothing for nil, an event for
// each element of an []any, else one event ("data: <json>\n\n").
func (s *sseWriter) add(v any) error {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		for _, e := range v {
			if err := s.add(e); err != nil {
				return err
			}
		}
		return nil
	}
	n := len(s.buf)
	s.buf = append(s.buf, "data: "...)
	var err error
	if s.buf, err = appendChunk(s.buf, v); err != nil {
		s.buf = s.buf[:n]
		return err
	}
	s.buf = append(s.buf, "\n\n"...)
	return nil
}

// done adds the event that ends the stream, as OpenAI ends it.
func (s *sseWriter) done() {
	s.buf = append(s.buf, "data: [DONE]\n\n"...)
}

// flush writes the events added since the last flush and flushes them to
// the client.
func (s *sseWriter) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	_, err := s.w.Write(s.buf)
	s.buf = s.buf[:0]
	if err != nil {
		return err
	}
	return s.rc.Flush()
}
