package console

import (
	"fmt"
	"net/http"
	"time"
)

// events streams every new snapshot as a server-sent event ("id: seq",
// "data: JSON"), the current one first. A slow reader skips snapshots:
// it is always sent the newest, never a backlog.
func (c *console) events(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	beat := time.NewTicker(c.cfg.Heartbeat)
	defer beat.Stop()
	f := c.cfg.Source.Latest()
	// encoding/json writes no newlines, so a snapshot is one data field.
	msg := fmt.Sprintf("id: %d\ndata: %s\n\n", f.Seq, f.JSON)
	for {
		if _, err := fmt.Fprint(w, msg); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-c.cfg.Stop:
			return
		case <-f.Replaced():
			f = c.cfg.Source.Latest()
			msg = fmt.Sprintf("id: %d\ndata: %s\n\n", f.Seq, f.JSON)
		case <-beat.C:
			msg = ": beat\n\n"
		}
	}
}
