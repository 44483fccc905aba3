package reqtrace

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestSamplingAndRing(t *testing.T) {
	t.Parallel()
	r := New(3, 2)
	var kept []string
	for i := range 9 {
		rec := r.Start(fmt.Sprint("req-", i), "", "chat_completions", "m")
		if (rec != nil) != (i%3 == 0) {
			t.Fatalf("request %d sampled = %v", i, rec != nil)
		}
		rec.Event("routed", "to %s", "decode-0") // nil-safe when unsampled
		rec.End(nil)
		if rec != nil {
			kept = append(kept, fmt.Sprint("req-", i))
		}
	}
	got := r.Recent()
	if len(got) != 2 || got[0].RequestID != "req-6" || got[1].RequestID != "req-3" {
		t.Fatalf("recent %+v, want req-6 then req-3 (of %v)", got, kept)
	}
	if !got[0].Done || len(got[0].Events) != 1 || got[0].Events[0].Detail != "to decode-0" {
		t.Errorf("trace %+v", got[0])
	}
	if New(0, 5).Start("x", "", "", "") != nil {
		t.Error("every 0 sampled a request")
	}
}

func TestRecorderBoundsAndEnds(t *testing.T) {
	t.Parallel()
	r := New(1, 1)
	rec := r.Start("a", "t", "completions", "m")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range MaxEvents {
				rec.Event("token", "")
			}
		})
	}
	wg.Wait()
	rec.End(errors.New("worker gone"))
	rec.Event("late", "")
	rec.End(nil)
	tr := r.Recent()[0]
	if len(tr.Events) != MaxEvents || tr.Error != "worker gone" || !tr.Done {
		t.Errorf("events %d, error %q, done %v; want %d, worker gone, done", len(tr.Events), tr.Error, tr.Done, MaxEvents)
	}
}
