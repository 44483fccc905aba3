package consuldisc

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/consul/api"

	"switchyard.dev/libs/mesh/backoff"
	"switchyard.dev/libs/mesh/discovery"
)

// The reconcile and watch loops against an in-memory agent, on
// testing/synctest's virtual clock: every wait (heartbeat interval,
// backoff, blocking query) is exact and costs no real time. The same
// behaviours against a real agent are in consuldisc_test.go.

const (
	testTTL        = 3 * time.Second // heartbeat every second
	testMaxBackoff = 2 * time.Second
	testWindow     = testTTL/3 + lapseSlack // the default lapse window
)

// half draws the middle of every jitter window, so each retry delay is
// exactly half its ceiling: jittered, yet known to the test.
type half struct{}

func (half) Int64N(n int64) int64 { return n / 2 }

// testRetry is the test registry's retry schedule.
var testRetry = backoff.Policy{Base: retryBase, Max: testMaxBackoff}

// logCount counts log records by level and message.
type logCount struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *logCount) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCount) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[r.Level.String()+" "+r.Message]++
	return nil
}
func (l *logCount) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCount) WithGroup(string) slog.Handler      { return l }
func (l *logCount) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[key]
}

func newTestRegistry(t *testing.T, a *fakeAgent) (*Registry, *logCount) {
	t.Helper()
	logs := &logCount{n: map[string]int{}}
	r, err := newRegistry(t.Context(), Config{
		Address: "fake", ServicePrefix: "sy-", CheckTTL: testTTL, DeregisterCriticalAfter: time.Minute,
		WatchWait: 5 * time.Second, LapseWindow: testWindow, MaxBackoff: testMaxBackoff, Rand: half{}, Logger: slog.New(logs),
	}, a)
	if err != nil {
		t.Fatal(err)
	}
	return r, logs
}

func instance(id string) discovery.Instance {
	return discovery.Instance{ID: id, Role: discovery.RoleDecode, Version: "1.0.0", Address: "127.0.0.1:9200"}
}

func TestUnreachableAgentFailsAtStart(t *testing.T) {
	t.Parallel()
	a := newFakeAgent()
	a.setDown(true)
	_, err := newRegistry(t.Context(), Config{Address: "10.0.0.1:8500"}, a)
	if err == nil || !errors.Is(err, errDown) {
		t.Fatalf("newRegistry with the agent down: %v; want an error wrapping %v", err, errDown)
	}
}

// An agent that restarted forgets the service; the next heartbeat fails
// and the loop registers it again, with the status it wants.
func TestReregistersAfterAgentRestart(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := newFakeAgent()
		r, _ := newTestRegistry(t, a)
		reg, err := r.Register(t.Context(), instance("d1"))
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.SetHealth(t.Context(), discovery.Critical); err != nil {
			t.Fatal(err)
		}
		a.restart()
		time.Sleep(testTTL/3 + time.Millisecond) // one heartbeat
		synctest.Wait()
		svc, status := a.service("sy-d1")
		if svc == nil || status != api.HealthCritical {
			t.Fatalf("after the agent restarted: service %v, status %q; want it registered again, critical as set", svc, status)
		}
		if err := reg.Deregister(t.Context()); err != nil {
			t.Fatal(err)
		}
		if svc, _ := a.service("sy-d1"); svc != nil {
			t.Fatal("still registered after Deregister")
		}
	})
}

// While the agent is down the loop retries with capped exponential
// backoff, logs the first and every tenth failure, and says once that the
// registration is back.
func TestBackoffWhileAgentDown(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := newFakeAgent()
		r, logs := newTestRegistry(t, a)
		reg, err := r.Register(t.Context(), instance("d1"))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		a.setDown(true)
		const failures = 12
		// The first heartbeat at TTL/3, then one retry per backoff.
		want := []time.Duration{testTTL / 3}
		for n := 1; n < failures; n++ {
			want = append(want, testRetry.Delay(n, half{}))
		}
		var total time.Duration
		for _, d := range want {
			total += d
		}
		time.Sleep(total + time.Millisecond)
		synctest.Wait()
		got := a.times("ttl")
		if len(got) != failures {
			t.Fatalf("%d heartbeats in %v; want %d", len(got), total, failures)
		}
		prev := start
		for i, at := range got {
			if gap := at.Sub(prev); gap != want[i] {
				t.Errorf("attempt %d came %v after the one before; want %v", i+1, gap, want[i])
			}
			prev = at
		}
		if n := logs.count("WARN consul registration out of sync; retrying"); n != 2 {
			t.Errorf("%d warnings over %d failures; want 2 (the first and the tenth)", n, failures)
		}
		a.setDown(false)
		time.Sleep(testMaxBackoff)
		synctest.Wait()
		if svc, status := a.service("sy-d1"); svc == nil || status != api.HealthPassing {
			t.Fatalf("after the agent came back: service %v, status %q; want registered, passing", svc, status)
		}
		if n := logs.count("INFO consul registration restored"); n != 1 {
			t.Errorf("%d 'restored' lines; want 1", n)
		}
		_ = reg.Deregister(t.Context())
	})
}

// Another process that registered the same id after ours went keeps it:
// the loop stops instead of taking it back, and Deregister leaves it.
func TestLeavesAnotherOwnersRegistration(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := newFakeAgent()
		r, logs := newTestRegistry(t, a)
		reg, err := r.Register(t.Context(), instance("d1"))
		if err != nil {
			t.Fatal(err)
		}
		other, _ := a.service("sy-d1")
		newcomer := *other
		newcomer.Meta = map[string]string{metaOwner: "someone-else", metaRole: discovery.RoleDecode}
		chk := *other.Check
		chk.CheckID = "switchyard:d1:someone-else"
		newcomer.Check = &chk
		a.put(&newcomer)
		time.Sleep(testTTL)
		synctest.Wait()
		if n := logs.count("ERROR consul: another instance registered this id; no longer registered"); n != 1 {
			t.Errorf("%d 'another instance' lines; want 1", n)
		}
		if err := reg.SetHealth(t.Context(), discovery.Critical); !errors.Is(err, discovery.ErrNotFound) {
			t.Errorf("SetHealth after losing the id: %v; want ErrNotFound", err)
		}
		if err := reg.Deregister(t.Context()); err != nil {
			t.Fatal(err)
		}
		if svc, status := a.service("sy-d1"); svc == nil || svc.Meta[metaOwner] != "someone-else" || status != api.HealthPassing {
			t.Fatalf("the newcomer's registration is %v (%q); want it untouched", svc, status)
		}
	})
}

// Register refuses an id a passing instance holds, and takes over one
// whose holder's check is critical (it died or drains).
func TestRegisterIDOwnership(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status string
		taken  bool
	}{{api.HealthPassing, true}, {api.HealthCritical, false}} {
		t.Run(tt.status, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				a := newFakeAgent()
				r, _ := newTestRegistry(t, a)
				a.put(&api.AgentServiceRegistration{ID: "sy-d1", Name: "sy-decode", Meta: map[string]string{metaOwner: "x"},
					Check: &api.AgentServiceCheck{CheckID: "switchyard:d1:x", Status: tt.status}})
				reg, err := r.Register(t.Context(), instance("d1"))
				if tt.taken {
					if !errors.Is(err, discovery.ErrIDTaken) {
						t.Fatalf("Register over a passing holder: %v; want ErrIDTaken", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Register over a critical holder: %v", err)
				}
				if svc, _ := a.service("sy-d1"); svc.Meta[metaOwner] == "x" {
					t.Fatal("the critical holder's registration was not replaced")
				}
				_ = reg.Deregister(t.Context())
			})
		})
	}
}

// The registration leaves the agent when its owner's context ends.
func TestDeregistersWhenOwnerEnds(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := newFakeAgent()
		r, _ := newTestRegistry(t, a)
		ctx, cancel := context.WithCancel(t.Context())
		if _, err := r.Register(ctx, instance("d1")); err != nil {
			t.Fatal(err)
		}
		cancel()
		synctest.Wait()
		if svc, _ := a.service("sy-d1"); svc != nil {
			t.Fatal("still registered after the owner's context ended")
		}
	})
}

// A watch blocks on the catalog's index, sees changes, retries through an
// outage with backoff, and resets when the agent's index goes back (a
// restart) instead of blocking forever on an index that will not return.
// An answer after such a reset lacks the instances the agent forgot; the
// watch keeps them for the lapse window, in which their loops register
// them again (TestWatchHolds has those that do not come back).
func TestWatch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		a := newFakeAgent()
		r, logs := newTestRegistry(t, a)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		ch, err := r.Watch(ctx, discovery.RoleDecode)
		if err != nil {
			t.Fatal(err)
		}
		expect := func(ids ...string) {
			t.Helper()
			synctest.Wait()
			select {
			case got := <-ch:
				if len(got) != len(ids) {
					t.Fatalf("watch sent %v; want %v", got, ids)
				}
				for i := range ids {
					if got[i].ID != ids[i] {
						t.Fatalf("watch sent %v; want %v", got, ids)
					}
				}
			default:
				t.Fatalf("watch sent nothing; want %v", ids)
			}
		}
		expect() // the first answer, empty
		regA, err := r.Register(t.Context(), instance("a"))
		if err != nil {
			t.Fatal(err)
		}
		expect("a")
		before := len(a.times("passing"))
		a.setDown(true)
		time.Sleep(time.Second)
		synctest.Wait()
		// The query in flight fails; retries follow after 50, 100, 200
		// and 400 ms (half of each ceiling: the test's jitter draw), the
		// next one only at 1.55 s.
		if n := len(a.times("passing")) - before; n != 4 {
			t.Errorf("%d new queries in the first second of an outage; want 4 (at 50, 150, 350 and 750 ms)", n)
		}
		if n := logs.count("WARN consul watch failed"); n != 1 {
			t.Errorf("%d watch warnings; want 1", n)
		}
		a.setDown(false)
		time.Sleep(time.Second)
		synctest.Wait()
		// The agent restarts: index back to 1, everything forgotten. The
		// answer that lacks a does not drop it: a's own loop registers it
		// again at its next heartbeat, within the lapse window.
		a.restart()
		quiet(t, ch, "after the restart")
		regB, err := r.Register(t.Context(), instance("b"))
		if err != nil {
			t.Fatal(err)
		}
		expect("a", "b")        // at once: the watch did not keep waiting on the old index
		time.Sleep(testTTL / 3) // a's next heartbeat registers it again
		quiet(t, ch, "a registered again")
		_ = regA.Deregister(t.Context())
		expect("b") // a deregistration is believed at once
		_ = regB.Deregister(t.Context())
		cancel()
		synctest.Wait()
	})
}
