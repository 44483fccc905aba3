package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"switchyard.dev/loadtest/internal/metrics"
	"switchyard.dev/loadtest/internal/openai"
	"switchyard.dev/loadtest/internal/workload"
)

// fakeSender takes a fixed (fake-clock) time per request and tracks how many
// requests overlap.
type fakeSender struct {
	latency time.Duration
	failOn  func(id int) bool

	mu          sync.Mutex
	inFlight    int
	maxInFlight int
}

func (f *fakeSender) Stream(ctx context.Context, req openai.Request, rec *metrics.Record) string {
	f.mu.Lock()
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	select {
	case <-time.After(f.latency):
	case <-ctx.Done():
		rec.Canceled, rec.Err = true, "canceled: "+context.Cause(ctx).Error()
		return ""
	}
	if f.failOn != nil && f.failOn(rec.ID) {
		rec.Err = "boom"
		return ""
	}
	rec.TTFT, rec.E2E, rec.OutputTokens, rec.Chunks = f.latency/2, f.latency, req.MaxTokens, req.MaxTokens
	return fmt.Sprintf("reply-%d", rec.ID)
}

type fakeSession struct {
	id, turns, n int
	at           time.Duration
	delay        time.Duration
	src          *fakeSource
}

func (s *fakeSession) ID() int           { return s.id }
func (s *fakeSession) At() time.Duration { return s.at }
func (s *fakeSession) Next(prev string) (workload.Turn, bool) {
	if s.n >= s.turns {
		return workload.Turn{}, false
	}
	s.src.mu.Lock()
	s.src.replies = append(s.src.replies, prev)
	s.src.mu.Unlock()
	t := workload.Turn{Request: openai.Request{MaxTokens: 4}, InputTokens: 10}
	if s.n > 0 {
		t.Delay = s.delay
	}
	s.n++
	return t, true
}

type fakeSource struct {
	timed bool
	at    []time.Duration // nil: unbounded, untimed
	turns int
	delay time.Duration
	next  int

	mu      sync.Mutex
	replies []string
}

func (f *fakeSource) Next() (workload.Session, bool) {
	if f.at != nil && f.next >= len(f.at) {
		return nil, false
	}
	s := &fakeSession{id: f.next, turns: max(1, f.turns), delay: f.delay, src: f}
	if f.at != nil {
		s.at = f.at[f.next]
	}
	f.next++
	return s, true
}
func (f *fakeSource) Timed() bool { return f.timed }
func (f *fakeSource) Len() int    { return len(f.at) }

func starts(recs []metrics.Record) map[int]time.Duration {
	m := map[int]time.Duration{}
	for _, r := range recs {
		m[r.Session] = r.Start
	}
	return m
}

func TestClosedLoopMaxRequests(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSender{latency: time.Second}
		res := New(Config{Concurrency: 3, MaxRequests: 10}, s).Run(t.Context(), &fakeSource{})
		if len(res.Records) != 10 || s.maxInFlight != 3 || res.Interrupted {
			t.Fatalf("%d records, max in flight %d", len(res.Records), s.maxInFlight)
		}
		ids := map[int]bool{}
		for _, r := range res.Records {
			ids[r.ID] = true
			if !r.OK() {
				t.Fatalf("record %+v failed", r)
			}
		}
		if len(ids) != 10 {
			t.Fatalf("ids not unique: %v", ids)
		}
		// 10 requests of 1s over 3 workers take 4 rounds on the fake clock.
		if res.Elapsed != 4*time.Second {
			t.Fatalf("elapsed %v on the fake clock, want 4s", res.Elapsed)
		}
	})
}

func TestOpenLoopFollowsSchedule(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		at := []time.Duration{0, time.Second, 2500 * time.Millisecond, 2500 * time.Millisecond}
		s := &fakeSender{latency: 10 * time.Second}
		res := New(Config{}, s).Run(t.Context(), &fakeSource{timed: true, at: at})
		if len(res.Records) != 4 || s.maxInFlight != 4 {
			t.Fatalf("%d records, max in flight %d", len(res.Records), s.maxInFlight)
		}
		st := starts(res.Records)
		for i, want := range at {
			if st[i] != want {
				t.Errorf("session %d started at %v, want %v", i, st[i], want)
			}
		}
	})
}

func TestOpenLoopConcurrencyCap(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSender{latency: time.Second}
		res := New(Config{Concurrency: 1}, s).Run(t.Context(), &fakeSource{timed: true, at: make([]time.Duration, 3)})
		st := starts(res.Records)
		for i := range 3 {
			if st[i] != time.Duration(i)*time.Second {
				t.Errorf("session %d started at %v, want %ds", i, st[i], i)
			}
		}
		for _, r := range res.Records {
			if r.Scheduled != 0 {
				t.Errorf("scheduled %v, want 0 (queueing shows as Start-Scheduled)", r.Scheduled)
			}
		}
	})
}

func TestDurationBoundWithGrace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s := &fakeSender{latency: time.Second}
		res := New(Config{Concurrency: 2, Duration: 5500 * time.Millisecond, Grace: 200 * time.Millisecond}, s).
			Run(t.Context(), &fakeSource{})
		var ok, canceled int
		for _, r := range res.Records {
			switch {
			case r.OK():
				ok++
			case r.Canceled:
				canceled++
				if r.Err != "canceled: "+errDurationGrace.Error() {
					t.Errorf("cancel reason %q", r.Err)
				}
			}
		}
		if ok != 10 || canceled != 2 || res.Interrupted {
			t.Fatalf("ok %d canceled %d interrupted %v; want 10, 2, false", ok, canceled, res.Interrupted)
		}
	})
}

func TestInterruptKeepsPartialResults(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(t.Context())
		go func() {
			time.Sleep(2500 * time.Millisecond)
			cancel(errors.New("interrupt"))
		}()
		res := New(Config{Concurrency: 2}, &fakeSender{latency: time.Second}).Run(ctx, &fakeSource{})
		var ok, canceled int
		for _, r := range res.Records {
			if r.OK() {
				ok++
			} else if r.Canceled && r.Err == "canceled: interrupt" {
				canceled++
			}
		}
		if !res.Interrupted || ok != 4 || canceled != 2 {
			t.Fatalf("interrupted %v ok %d canceled %d; want true 4 2", res.Interrupted, ok, canceled)
		}
	})
}

func TestMultiTurnSessions(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := &fakeSource{at: make([]time.Duration, 2), turns: 3, delay: 5 * time.Second}
		s := &fakeSender{latency: time.Second, failOn: func(id int) bool { return id == 1 }}
		res := New(Config{Concurrency: 1}, s).Run(t.Context(), src)
		// Session 0: turn 0 ok (id 0), turn 1 fails (id 1) and ends the
		// session; session 1 runs all three turns.
		if len(res.Records) != 5 {
			t.Fatalf("%d records, want 5", len(res.Records))
		}
		want := []struct{ session, turn int }{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 2}}
		for i, w := range want {
			r := res.Records[i]
			if r.Session != w.session || r.Turn != w.turn {
				t.Fatalf("record %d is session %d turn %d, want %d/%d", i, r.Session, r.Turn, w.session, w.turn)
			}
		}
		// Turn 1 of session 0 waited 5s of think time after a 1s turn.
		if res.Records[1].Start != 6*time.Second || res.Records[1].Scheduled != 6*time.Second {
			t.Fatalf("turn 1 started %v scheduled %v, want 6s", res.Records[1].Start, res.Records[1].Scheduled)
		}
		if src.replies[0] != "" || src.replies[1] != "reply-0" {
			t.Fatalf("replies passed to sessions: %q", src.replies)
		}
	})
}

func TestStats(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := New(Config{Concurrency: 1, MaxRequests: 3}, &fakeSender{latency: time.Second, failOn: func(id int) bool { return id == 2 }})
		r.Run(t.Context(), &fakeSource{})
		st := r.Stats()
		if st.Issued != 3 || st.Done != 3 || st.Failed != 1 || st.OutputTokens != 8 {
			t.Fatalf("stats %+v", st)
		}
	})
}

// preparingSender encodes requests ahead of their send, which takes
// prepTime of (fake) time, and records when each Stream began and whether
// its request arrived encoded.
type preparingSender struct {
	fakeSender
	prepTime time.Duration
	start    time.Time

	calls   sync.Mutex
	sentAt  []time.Duration
	unready int
}

func (p *preparingSender) Prepare(req *openai.Request) error {
	time.Sleep(p.prepTime)
	req.Encoded = []byte("body")
	return nil
}

func (p *preparingSender) Stream(ctx context.Context, req openai.Request, rec *metrics.Record) string {
	p.calls.Lock()
	p.sentAt = append(p.sentAt, time.Since(p.start))
	if req.Encoded == nil {
		p.unready++
	}
	p.calls.Unlock()
	return p.fakeSender.Stream(ctx, req, rec)
}

// Requests are built and encoded ahead of their scheduled time, so a burst
// is sent on time however long each takes to build (built at send time,
// a burst of long prompts went out one build time apart, the lateness
// counted nowhere); and the lateness that remains is reported.
func TestOpenLoopPreparesAhead(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		at := []time.Duration{0, time.Second, time.Second, time.Second}
		s := &preparingSender{fakeSender: fakeSender{latency: time.Second}, prepTime: 100 * time.Millisecond, start: time.Now()}
		res := New(Config{}, s).Run(t.Context(), &fakeSource{timed: true, at: at})
		if len(res.Records) != 4 || s.unready != 0 {
			t.Fatalf("%d records, %d sent without being prepared", len(res.Records), s.unready)
		}
		slices.Sort(s.sentAt)
		want := []time.Duration{100 * time.Millisecond, time.Second, time.Second, time.Second} // the first could not be built earlier
		if !slices.Equal(s.sentAt, want) {
			t.Fatalf("sent at %v, want %v", s.sentAt, want)
		}
		agg := metrics.Aggregate(res.Records, res.Elapsed, metrics.SLA{})
		if agg.SendLagms.Max != 100 || agg.SendLagms.Count != 4 {
			t.Fatalf("send lag %+v, want max 100 ms over 4 requests", agg.SendLagms)
		}
	})
}
