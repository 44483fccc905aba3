package httpapi

import (
	"encoding/json"
	"net/http"
)

// sseWriter writes server-sent events, flushing each so tokens reach the
// client as they are generated.
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

// event writes "data: <json>\n\n".
func (s *sseWriter) event(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	s.buf = append(append(append(s.buf[:0], "data: "...), b...), "\n\n"...)
	return s.write()
}

// done ends the stream as OpenAI does.
func (s *sseWriter) done() error {
	s.buf = append(s.buf[:0], "data: [DONE]\n\n"...)
	return s.write()
}

func (s *sseWriter) write() error {
	if _, err := s.w.Write(s.buf); err != nil {
		return err
	}
	return s.rc.Flush()
}
